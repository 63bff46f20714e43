"""Where a job's initial weights come from: ``--warm-start auto|none|URI`` (``LANDFALL_WARM_START``).

- ``none``: fresh weights (the seed's initialisers).
- ``auto`` (default): the newest succeeded model of the same dataset. A released job's ``inputs.json``
  names the job it follows (``after``); that job's ``metrics.json`` says whether it succeeded and where
  its model is. A predecessor that failed is skipped for its own predecessor, at most ``MAX_HOPS`` back,
  so the lookup reads a bounded number of small objects however long the dataset's history. A job
  started from ``--manifest`` (not from a released job's inputs), or a dataset's first job, has no
  predecessor and starts fresh. Whatever the outcome, the reason is logged and recorded in
  ``metrics.json`` (``warm_start_from``, ``warm_start``).
- ``URI``: a model folder (``.../runs/<job>/model``) or a job dir holding one. Asked for by name, it must
  exist and fit the model: otherwise the job fails (exit 4 or 3) rather than train from scratch unasked.

A predecessor fits when it was trained with the same instance shape and GRU widths (read from its
``metrics.json`` and ``normalization.json`` before TensorFlow starts), and every array of its
``weights.npz`` has the shape of the new model's (checked when the weights are set). ``auto`` starts
fresh, and says why, when either check fails.

Only the weights carry over: the optimizer starts fresh, and normalisation uses the new inputs' statistics
(``normalization.json`` beside the new model says so), because the data moved on since the predecessor.
A restarted job resumes from its own backup checkpoint, which overrides the warm start.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from landfall.core import logs
from landfall.core.artifacts.champion import NORMALIZATION
from landfall.core.contracts.messages import JobInputs
from landfall.core.errors import Invalid, NotFound
from landfall.core.services.storage import Storage, join
from trainer.config import TrainerConfig
from trainer.jobdir import METRICS, MODEL, JobDir
from trainer.training.inputs import INPUTS_NAME, inputs_uri

log = logs.get("trainer.training.warmstart")

WEIGHTS = "weights.npz"  # beside the SavedModel: the arrays of ``model.get_weights()``, in order
MAX_HOPS = 10  # predecessors looked at, newest first, before giving up


@dataclasses.dataclass(frozen=True)
class WarmStart:
    model: str | None  # the model folder to start from; None: fresh weights
    reason: str  # why (logged and recorded)
    mode: str  # auto | none | uri
    job: str | None = None  # the predecessor job, when found

    def record(self) -> dict:
        return {"warm_start_from": self.model,
                "warm_start": {"mode": self.mode, "job": self.job, "reason": self.reason}}


def resolve(cfg: TrainerConfig, storage: Storage) -> WarmStart:
    """Decides where the weights come from, reading only small JSON objects (before TensorFlow)."""
    choice = (cfg.warm_start or "auto").strip()
    if choice.lower() == "none":
        return WarmStart(None, "--warm-start none", "none")
    if choice.lower() != "auto":
        return _explicit(choice, cfg, storage)
    released = inputs_uri(cfg.manifests)
    if released is None:
        return WarmStart(None, "no predecessor known: trained from --manifest, not from a released job's "
                               "inputs.json (pass --warm-start URI to start from a model)", "auto")
    try:
        current = JobInputs.from_json(storage.read_bytes(released), released)
    except (NotFound, Invalid) as exc:
        return WarmStart(None, f"cannot read {released}: {exc}", "auto")
    runs = released.rsplit("/", 2)[0]  # gs://B/runs/<job>/inputs.json -> gs://B/runs
    job, skipped = current.after, []
    for _ in range(MAX_HOPS):
        if not job:
            break
        found, why, before = _predecessor(storage, runs, job, current.dataset, cfg)
        if found:
            note = f" (skipped {', '.join(skipped)})" if skipped else ""
            return WarmStart(found, f"newest succeeded model of dataset {current.dataset}: {job}{note}", "auto", job)
        skipped.append(f"{job}: {why}")
        job = before
    if not skipped:
        return WarmStart(None, f"the first job of dataset {current.dataset}: no predecessor", "auto")
    return WarmStart(None, "no usable predecessor: " + "; ".join(skipped), "auto")


def _predecessor(storage: Storage, runs: str, job: str, dataset: str,
                 cfg: TrainerConfig) -> tuple[str | None, str, str | None]:
    """(model folder if usable, why not, the job before it)."""
    job_dir = join(runs, job)
    before = None
    with contextlib.suppress(NotFound, Invalid):  # a job started by hand has no inputs.json
        before = JobInputs.from_json(storage.read_bytes(join(job_dir, INPUTS_NAME))).after
    metrics = JobDir(storage, job_dir).read_json(METRICS)
    if metrics is None:
        return None, "no metrics.json", before
    if metrics.get("status") != "succeeded" or not metrics.get("model"):
        return None, f"status {metrics.get('status')!r}", before
    if metrics.get("dataset") != dataset:
        return None, f"dataset {metrics.get('dataset')!r}", before
    model, why = _fits(storage, str(metrics["model"]), cfg)
    return model, why, before


def _explicit(uri: str, cfg: TrainerConfig, storage: Storage) -> WarmStart:
    model = uri.rstrip("/")
    if not storage.exists(join(model, WEIGHTS)) and storage.exists(join(model, MODEL, WEIGHTS)):
        model = join(model, MODEL)  # a job dir
    found, why = _fits(storage, model, cfg)
    if found is None:
        if why.startswith("no "):
            raise NotFound(f"--warm-start {uri}: {why}")
        raise Invalid(f"--warm-start {uri}: {why}")
    return WarmStart(found, f"--warm-start {uri}", "uri")


def _fits(storage: Storage, model: str, cfg: TrainerConfig) -> tuple[str | None, str]:
    if not storage.exists(join(model, WEIGHTS)):
        return None, f"no {WEIGHTS} in {model} (saved by a trainer without warm starts)"
    norm = JobDir(storage, model).read_json(NORMALIZATION) or {}
    shape = tuple(norm.get("shape") or ())
    if shape != tuple(cfg.shape):
        return None, f"its instances are {list(shape)}, this job's {list(cfg.shape)}"
    kind = norm.get("kind") or "gru"  # models saved before kinds existed are the seed's GRU
    if kind != cfg.model_kind:
        return None, f"it is a {kind} model, this job's is {cfg.model_kind}"
    units = tuple(norm.get("units") or ())
    if units != tuple(cfg.units):
        return None, f"its widths are {list(units)}, this job's {list(cfg.units)}"
    return model, "fits"


def fetch(storage: Storage, start: WarmStart, local_dir: Path) -> Path | None:
    """Downloads the weights file; None for a fresh start."""
    if start.model is None:
        return None
    local_dir.mkdir(parents=True, exist_ok=True)
    path = local_dir / WEIGHTS
    storage.download(join(start.model, WEIGHTS), path)
    return path
