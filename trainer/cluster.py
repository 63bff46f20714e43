"""The cluster as ``TF_CONFIG`` describes it, read without importing TensorFlow.

The Kubeflow training operator sets, on every replica of a TFJob::

    {"cluster": {"worker": ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"]},
     "task": {"type": "worker", "index": 1}}

Worker 0 is the chief (unless the job has a ``chief`` replica, which then comes first). With no
``TF_CONFIG`` the trainer is a cluster of one.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping

from landfall.core.errors import Invalid


@dataclasses.dataclass(frozen=True)
class Cluster:
    num_workers: int = 1
    worker_index: int = 0
    task_type: str = "worker"
    configured: bool = False  # TF_CONFIG was present

    @property
    def is_chief(self) -> bool:
        return self.worker_index == 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Cluster:
        env = os.environ if env is None else env
        text = env.get("TF_CONFIG", "").strip()
        if not text:
            return cls()
        try:
            raw = json.loads(text)
            spec = raw.get("cluster") or {}
            task = raw.get("task") or {}
            task_type = str(task.get("type", "worker"))
            index = int(task.get("index", 0))
            chiefs = list(spec.get("chief", []))
            workers = list(spec.get("worker", []))
        except (ValueError, TypeError, AttributeError) as exc:
            raise Invalid(f"TF_CONFIG is not valid: {exc}") from None
        if task_type not in ("worker", "chief"):
            raise Invalid(f"TF_CONFIG task type {task_type!r}: this trainer runs only worker (and chief) replicas")
        members = chiefs + workers
        position = index if task_type == "chief" else len(chiefs) + index
        if not members or not 0 <= position < len(members):
            raise Invalid(f"TF_CONFIG task {task_type}/{index} is not in its cluster {spec}")
        return cls(num_workers=len(members), worker_index=position, task_type=task_type, configured=True)
