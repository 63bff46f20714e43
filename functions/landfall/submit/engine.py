"""The engine behind a released job: ``LANDFALL_ENGINE=tfjob`` (the library's default) or ``jobset`` (what a deploy
gets: ``infra/modules/functions`` and the overlays' ``k8s/components/jobset``; docs/submit.md, "Which engine a deploy
gets").

- ``tfjob`` (``landfall.submit.tfjob``): a Kubeflow ``TFJob``, run by the training operator (v1, legacy:
  patch releases only; Kueue v0.19 no longer queues it by default).
- ``jobset`` (``landfall.submit.jobset``): a ``JobSet``, run by the JobSet controller; the trainer builds
  its own ``TF_CONFIG`` (``trainer.cluster``).

Everything else (coalescing, the ledger, the bucket records, the job names, labels and annotations) is the
same for both: this module is the one place that picks the module by the configuration (``render``,
``api``, ``missing_hint``: the ways out when the cluster lacks the engine's CRD) or by the object's ``kind`` (the
readers), so callers never branch on the engine.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NamedTuple

from landfall.submit import jobset, tfjob
from landfall.submit.config import JobConfig

MODULES: dict[str, ModuleType] = {"tfjob": tfjob, "jobset": jobset}
_BY_KIND = {m.KIND: m for m in MODULES.values()}


class Api(NamedTuple):
    """Where an engine's objects live on the API server."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def module(engine: str) -> ModuleType:
    try:
        return MODULES[engine]
    except KeyError:
        raise ValueError(f"engine must be one of {tuple(MODULES)}, not {engine!r}") from None


def api(engine: str) -> Api:
    m = module(engine)
    return Api(m.GROUP, m.VERSION, m.PLURAL, m.KIND)


def missing_hint(engine: str) -> str:
    """The ways out when the cluster has no CRD for ``engine``'s kind (``MissingCRD``): install what serves it, at
    the release the docs pin, or deploy with the other engine."""
    m = module(engine)
    other = " or ".join(e for e in MODULES if e != engine)
    return f"install {m.INSTALL} (k8s/README.md), or deploy with LANDFALL_ENGINE={other}"


def of(job: dict[str, Any]) -> ModuleType:
    """The module of a job object, by its ``kind`` (a TFJob when it names none)."""
    return _BY_KIND.get(str(job.get("kind") or tfjob.KIND), tfjob)


def render(cfg: JobConfig, **kwargs: Any) -> dict[str, Any]:
    """The job ``cfg.engine`` names, as ``tfjob.render`` takes its arguments."""
    return module(cfg.engine).render(cfg, **kwargs)  # type: ignore[no-any-return]


def state(job: dict[str, Any]) -> str:
    """``Pending``, ``Suspended``, ``Running``, ``Restarting`` (TFJob only), ``Succeeded`` or ``Failed``."""
    return of(job).state(job)  # type: ignore[no-any-return]


def is_finished(job: dict[str, Any]) -> bool:
    return state(job) in ("Succeeded", "Failed")


def is_suspended(job: dict[str, Any]) -> bool:
    return of(job).is_suspended(job)  # type: ignore[no-any-return]


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return of(job).conditions(job)  # type: ignore[no-any-return]


def containers_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return of(job).containers_of(job)  # type: ignore[no-any-return]


def workers_of(job: dict[str, Any]) -> int:
    """How many training processes (workers) the job runs."""
    return of(job).workers_of(job)  # type: ignore[no-any-return]


def bucket_of(job: dict[str, Any]) -> str:
    """The bucket from the job's ``--job-dir gs://BUCKET/...`` argument (when the config names none)."""
    return tfjob.bucket_in(containers_of(job))
