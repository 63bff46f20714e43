"""Following detections on the laptop stack: waiting for an arrival's ``landfall.detection/v1`` message on the pull
subscription ``landfall up`` keeps (``landfall-detections``), and saying it in one line (the demo's last stage, the
latency benchmark)."""

from __future__ import annotations

import time
from typing import Any

from landfall.core.artifacts import detections
from landfall.core.errors import Invalid, LandfallError
from landfall.core.services.pubsub import PubSub


class NoDetection(LandfallError):
    """No detection message for the arrival within the time allowed."""


def wait_for(pubsub: PubSub, subscription: str, arrival: str, timeout_s: float,
             poll_s: float = 1.0) -> tuple[dict[str, Any], float]:
    """The first detection message of ``arrival`` and the wall time it was pulled (``time.time()``). Other messages
    are acknowledged and dropped: the subscription is this follower's."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for msg in pubsub.pull(subscription, timeout_s=poll_s):
            pubsub.ack(subscription, [msg.ack_id])
            try:
                body = detections.loads_message(msg.data)
            except Invalid:
                continue
            if body.get("arrival") == arrival:
                return body, time.time()
        time.sleep(0.1)
    raise NoDetection(f"no detection message for arrival {arrival} on {subscription} within {timeout_s:.0f} s")


def describe(message: dict[str, Any], shown: int = 3) -> str:
    """One line: what the champion found in the arrival, and where."""
    kind = "rows" if message.get("kind") == "series" else "instances"
    ranges = message.get("ranges") or []
    line = (f"detection on {message['dataset']}/{message['arrival']} by champion {message['champion']['run']}: "
            f"{message['anomalies']} of {message['count']} {kind} above {message['threshold']:.4g}, "
            f"{message.get('ranges_total', len(ranges))} range(s)")
    if message.get("check_status"):
        line += f" (arrival checks: {message['check_status']})"
    parts = []
    for r in sorted(ranges, key=lambda r: -float(r.get("peak_score") or 0))[:shown]:
        start, end = r.get("start_at", r.get("start")), r.get("end_at", r.get("end"))
        parts.append(f"{start}..{end} peak {float(r['peak_score']):.4g}")
    return line + (": " + "; ".join(parts) if parts else "")
