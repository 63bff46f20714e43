"""Named reads of one bucket's records, and the state of its jobs: what ``landfall trace`` and ``landfall report``
(``landfall.views.page``, which the demo writes too) read. Read-only: nothing here writes."""

from __future__ import annotations

import json
from typing import Any

from landfall.core.artifacts import champion
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import JobInputs
from landfall.core.errors import Invalid, LandfallError, NotFound
from landfall.submit import engine, jobmeta
from landfall.submit.ledger import Ledger


class Reader:
    """Named reads of one bucket's records (and the backend's TFJobs, when there is one)."""

    def __init__(self, storage: Any, bucket: str, lay: Layout, backend: Any = None):
        self.storage, self.bucket, self.lay, self.backend = storage, bucket, lay, backend
        self.ledger = Ledger(storage, bucket, lay)

    def uri(self, name: str) -> str:
        return layout.gs(self.bucket, name)

    def json(self, uri: str) -> dict[str, Any] | None:
        """The record at ``uri``, ``None`` if absent, ``{"invalid": why}`` if unreadable."""
        try:
            raw = json.loads(self.storage.read_bytes(uri))
        except NotFound:
            return None
        except ValueError as exc:
            return {"invalid": f"not JSON: {exc}"}
        return raw if isinstance(raw, dict) else {"invalid": "not a JSON object"}

    def job_dir(self, job: str) -> str:
        return jobmeta.job_dir(self.bucket, job, self.lay.runs_prefix)

    def inputs(self, job: str) -> JobInputs | None:
        try:
            return self.ledger.read_inputs(job)
        except (NotFound, Invalid):
            return None

    def tfjob_state(self, job: str) -> str | None:
        """The TFJob's state (``Running``, ``Succeeded``...), ``None`` when the backend has no such object."""
        if self.backend is None:
            return None
        try:
            return engine.state(self.backend.get(job))  # a TFJob or a JobSet
        except NotFound:
            return None
        except LandfallError:
            return None

    def job_failure(self, job: str) -> str | None:
        """Why the job failed, in its engine's words, while the backend still has it (``engine.failure``)."""
        if self.backend is None:
            return None
        try:
            return engine.failure(self.backend.get(job))
        except LandfallError:
            return None

    def job_state(self, job: str) -> tuple[str, str]:
        """(state, where it comes from): the TFJob, else the bucket's metrics.json / submitted.json."""
        state = self.tfjob_state(job)
        if state:
            return state, "TFJob"
        doc = self.json(self.job_dir(job) + "/metrics.json") or {}
        status = doc.get("status")
        if status in ("succeeded", "failed"):
            return status.capitalize(), "metrics.json (its TFJob is gone)"
        if self.ledger.was_submitted(job):
            return ("Ended" if self.backend is not None else "Released"), (
                "submitted.json; no TFJob any more (TTL)" if self.backend is not None else "submitted.json")
        return "Released", "inputs.json (its TFJob is not created yet)"

    def champion(self, dataset: str) -> champion.Champion | None:
        try:
            current, _ = champion.read(self.storage, champion.bucket_root(self.bucket), dataset)
        except (LandfallError, ValueError):
            return None
        return current
