"""Why a dataset's waiting requests wait: one explanation (``landfall.submit.coalesce.explain``: the running job
they wait behind, the retrain policy's holds with their reasons and until when, or too little data) and its one line
of text, which ``landfall status`` prints and ``landfall report`` shows (issue #56: the report wrote its own text,
which knew neither the policy's holds nor the budget)."""

from __future__ import annotations

from typing import Any

from landfall.core.contracts.layout import Layout
from landfall.core.errors import LandfallError
from landfall.submit import coalesce


def explain(dataset: str, cfg: Any, backend: Any, storage: Any, lay: Layout | None = None,
            clock: Any = None) -> dict[str, Any]:
    """``coalesce.explain``'s answer (``policy``, ``spend``, and ``next`` when requests wait), or ``{"error": why}``
    when it cannot be told (no job backend to ask whether the dataset's job runs, an unreadable record)."""
    if backend is None:
        return {"error": "no job backend to ask whether the dataset's job still runs"}
    try:
        return coalesce.explain(dataset, cfg, backend, storage, lay, clock)
    except LandfallError as exc:
        return {"error": str(exc)}


def why(explained: dict[str, Any]) -> str | None:
    """One line: why the next release waits; None when no request waits."""
    if "error" in explained:
        return f"unknown: {explained['error']}"
    nxt = explained.get("next") or {}
    state = nxt.get("state")
    if state == "held" and nxt.get("data"):  # too little data (landfall.submit.sufficient)
        return f"{nxt['reason']}; released once there is enough (requests retired {nxt['retired_at']})"
    if state == "held":
        return f"held until {nxt['until']}: {nxt['reason']}"
    if state == "waiting_for_job":
        return f"released once {nxt['job']} ends"
    if state == "releasable":
        return "releasable: the next request or reconcile pass releases it"
    return None
