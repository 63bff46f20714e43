"""The engine behind a released job: ``LANDFALL_ENGINE=tfjob`` (the library's default) or ``jobset`` (what a deploy
gets: ``infra/modules/functions`` and the overlays' ``k8s/components/jobset``; docs/submit.md, "Which engine a deploy
gets").

- ``tfjob`` (``landfall.submit.tfjob``): a Kubeflow ``TFJob``, run by the training operator (v1, legacy:
  patch releases only; Kueue v0.19 no longer queues it by default).
- ``jobset`` (``landfall.submit.jobset``): a ``JobSet``, run by the JobSet controller; the trainer builds
  its own ``TF_CONFIG`` (``trainer.training.cluster``).

Everything else (coalescing, the ledger, the bucket records, the job names, labels and annotations) is the
same for both: this module is the one place that picks the module by the configuration (``render``,
``api``, ``missing_hint``: the ways out when the cluster lacks the engine's CRD) or by the object's ``kind`` (the
readers), so callers never branch on the engine.
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple, Protocol, cast

from landfall.core.config import ENGINE_BACKENDS
from landfall.submit import jobmeta
from landfall.submit.config import ENGINES, JobConfig


class Engine(Protocol):
    """What an engine module provides (``landfall.submit.tfjob`` and ``landfall.submit.jobset`` are two): where its
    objects live, what serves them, the object a released job is, and its readers. The names, labels, annotations
    and the trainer's container are every engine's (``landfall.submit.jobmeta``). **To add an engine**, write
    ``landfall/submit/<name>.py`` with these and add ``<name>`` to ``landfall.core.config.ENGINES`` (the one list the
    config, a dataset spec, this module and the local operators read)."""

    GROUP: str
    VERSION: str
    PLURAL: str
    KIND: str
    INSTALL: str  # what serves the kind, at the release the docs pin

    def render(self, cfg: JobConfig, *, name: str, dataset: str, request_id: str, inputs_uri: str,
               after: str | None = None, released_at: str | None = None,
               runs_prefix: str = "runs/") -> dict[str, Any]: ...

    def state(self, job: dict[str, Any]) -> str: ...

    def is_suspended(self, job: dict[str, Any]) -> bool: ...

    def conditions(self, job: dict[str, Any]) -> list[dict[str, Any]]: ...

    def containers_of(self, job: dict[str, Any]) -> list[dict[str, Any]]: ...

    def workers_of(self, job: dict[str, Any]) -> int: ...


MODULES: dict[str, Engine] = {name: cast(Engine, importlib.import_module(f"landfall.submit.{name}"))
                              for name in ENGINES}
TFJOB = MODULES["tfjob"]  # an object that names no kind is a TFJob (the first engine)
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


def module(engine: str) -> Engine:
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
    # The other engines that run where this one does (core.config.ENGINE_BACKENDS): on the same cluster.
    other = " or ".join(e for e in MODULES if e != engine and set(ENGINE_BACKENDS[e]) & set(ENGINE_BACKENDS[engine]))
    return f"install {m.INSTALL} (k8s/README.md), or deploy with LANDFALL_ENGINE={other}"


def of(job: dict[str, Any]) -> Engine:
    """The module of a job object, by its ``kind`` (a TFJob when it names none)."""
    return _BY_KIND.get(str(job.get("kind") or TFJOB.KIND), TFJOB)


def render(cfg: JobConfig, **kwargs: Any) -> dict[str, Any]:
    """The job ``cfg.engine`` names, as ``tfjob.render`` takes its arguments."""
    return module(cfg.engine).render(cfg, **kwargs)


def state(job: dict[str, Any]) -> str:
    """``Pending``, ``Suspended``, ``Running``, ``Restarting`` (TFJob only), ``Succeeded`` or ``Failed``."""
    return of(job).state(job)


def is_finished(job: dict[str, Any]) -> bool:
    return state(job) in ("Succeeded", "Failed")


def is_suspended(job: dict[str, Any]) -> bool:
    return of(job).is_suspended(job)


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return of(job).conditions(job)


def containers_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return of(job).containers_of(job)


def failure(job: dict[str, Any]) -> str | None:
    """Why a failed job failed, in its engine's words (its ``Failed`` condition's message); None otherwise."""
    return next((str(c["message"]) for c in reversed(conditions(job)) if c.get("type") == "Failed"
                 and c.get("status") == "True" and c.get("message")), None)


def workers_of(job: dict[str, Any]) -> int:
    """How many training processes (workers) the job runs."""
    return of(job).workers_of(job)


def bucket_of(job: dict[str, Any]) -> str:
    """The bucket from the job's ``--job-dir gs://BUCKET/...`` argument (when the config names none)."""
    return jobmeta.bucket_in(containers_of(job))
