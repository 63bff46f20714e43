"""Every retrain ends in a verdict: evaluated against the champion, promoted or not, announced.

``conclude`` (the chief, after the model is saved, before metrics say ``succeeded``):
1. Evaluation on common ground. The challenger (the model in memory) and the dataset's champion (the model
   ``models/<dataset>/champion.json`` names) are scored on the same instances: the held-out records of this
   job's plan that the chief holds. Each model normalises with its own statistics and its reconstructions
   are de-normalised, so the loss is the reconstruction MSE in the data's original units
   (``trainer.scoring``). On several workers the chief evaluates its own share of the held-out split
   (``Plan.val_slices`` of worker 0, about ``1/num_workers`` of it): the split is a deterministic function of
   (seed, shard URI, record index) and the shares are contiguous runs of it, so both models see exactly the
   same instances and a rerun sees them again; staging the other workers' shards would cost a second
   download for a sample that is already unbiased.
2. The threshold. The challenger's per-instance errors give the quantiles p50, p95, p99, p99.9 and the
   anomaly threshold (the ``threshold_quantile``, default p99), written beside the model as ``threshold.json``.
3. Promotion with a guard (``landfall.core.champion``): promoted when its loss <= the champion's x
   (1 + ``promote_tolerance``), or when the dataset has no champion (or one whose model cannot be loaded any
   more); the write is conditional on ``champion.json``'s generation, and a job that loses the race
   evaluates the new champion and compares again.
Returns the fields for ``metrics.json``: ``verdict`` (``promoted`` | ``kept_champion`` | ``not_evaluated``),
``challenger_loss``, ``champion_loss``, ``champion`` (the champion's model URI after the verdict),
``champion_run``, ``threshold`` and ``evaluation``. ``not_evaluated``: no held-out instance on the chief
(``--validation-fraction 0``, or too little data), or a job over several datasets.

``model`` is the chief's local SavedModel folder (as ``trainer.train`` passes it) or a Keras model. The trainer
passes the folder: under MultiWorkerMirroredStrategy a BatchNormalization statistic is a sync-on-read
variable, and calling the in-memory model on the chief alone would read it with an all-reduce the other
workers, already gone, never join.

``publish_result`` (the chief, at the very end): the job's one ``landfall.result/v1`` message
(``landfall.core.results``), guarded by ``runs/<job>/result.json``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from landfall.core import champion as champion_mod
from landfall.core import logs, results
from landfall.core.errors import TemporaryError
from landfall.core.pubsub import PubSub
from landfall.core.storage import Storage, is_gs
from trainer import scoring
from trainer.config import TrainerConfig
from trainer.inputs import Inputs, Plan, inputs_uri
from trainer.jobdir import MODEL, JobDir

log = logs.get("trainer.verdict")

METRIC = "mse_original_units"


def _held_out(plan: Plan, paths: list[str], shape: tuple[int, int]):
    """The chief's held-out instances in original units, block by block (deterministic order)."""
    from trainer import data

    ds = data.read_instances(plan, paths, shape, data.VALIDATION, deterministic=True)
    yield from ds.as_numpy_iterator()


def models_root(cfg: TrainerConfig) -> str:
    return cfg.models or champion_mod.models_root(cfg.job_dir)


def conclude(cfg: TrainerConfig, job: JobDir, metrics, model, plan: Plan, paths: list[str], inputs: Inputs,
             mean, std, storage: Storage) -> dict[str, Any]:
    started = time.monotonic()
    run = str(metrics.doc.get("job") or job.uri.rstrip("/").rsplit("/", 1)[-1])
    model_uri = job.path(MODEL)
    shape = tuple(inputs.shape)
    if isinstance(model, (str, os.PathLike)):  # the chief's saved copy: see below
        challenger = scoring.Scorer.load(storage, str(model))
        challenger.uri = model_uri
    else:
        challenger = scoring.Scorer.from_model(model, mean, std, shape, model_uri)  # type: ignore[arg-type]
    errors = challenger.errors_of(_held_out(plan, paths, shape))  # type: ignore[arg-type]
    evaluation: dict[str, Any] = {"metric": METRIC, "instances": len(errors),
                                  "split": f"held-out share of worker 0 of {plan.num_workers}"}
    datasets = inputs.datasets
    if not len(errors) or len(datasets) != 1:
        why = "no held-out instance" if not len(errors) else f"trained on {len(datasets)} datasets"
        log.warning(f"not evaluated: {why}", extra={"job": run, "fields": {"datasets": datasets}})
        return {"verdict": "not_evaluated", "challenger_loss": None, "champion_loss": None, "champion": None,
                "champion_run": None, "threshold": None, "evaluation": {**evaluation, "reason": why}}
    loss = float(errors.mean())
    threshold = scoring.threshold_doc(errors, cfg.threshold_quantile)
    job.write_json(f"{MODEL}/{champion_mod.THRESHOLD}", threshold)
    dataset = datasets[0]
    cache_dir = tempfile.mkdtemp(prefix="landfall-champion-")
    losses: dict[str, float | None] = {}

    def evaluate(current: champion_mod.Champion) -> float | None:
        if current.model not in losses:
            t0 = time.monotonic()
            try:
                scorer = scoring.Scorer.load(storage, current.model, cache_dir)
                value: float | None = float(scorer.errors_of(_held_out(plan, paths, shape)).mean())  # type: ignore[arg-type]
            except TemporaryError:
                raise
            except Exception as exc:  # gone or unloadable: a champion that cannot score is replaced
                log.warning(f"champion {current.run} cannot be evaluated ({exc}); the challenger replaces it",
                            extra={"job": run, "dataset": dataset, "fields": {"champion_model": current.model}})
                value = None
            losses[current.model] = value
            log.info("champion evaluated", extra={"job": run, "dataset": dataset, "fields": {
                "champion_run": current.run, "champion_loss": value, "wall_s": round(time.monotonic() - t0, 3)}})
        return losses[current.model]

    try:
        outcome, champion_loss = champion_mod.promote_evaluated(
            storage, models_root(cfg), dataset, run=run, model=model_uri, loss=loss, evaluate=evaluate,
            tolerance=cfg.promote_tolerance,
            evaluation={"instances": len(errors), "metric": METRIC, "threshold": threshold["value"],
                        "quantiles": threshold["quantiles"]})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    verdict = "promoted" if outcome.promoted else "kept_champion"
    current = outcome.champion
    fields = {
        "verdict": verdict,
        "challenger_loss": loss,
        "champion_loss": champion_loss,
        "champion": current.model if current else None,
        "champion_run": current.run if current else None,
        "threshold": threshold,
        "evaluation": {**evaluation, "tolerance": cfg.promote_tolerance,
                       "wall_s": round(time.monotonic() - started, 3)},
    }
    log.info(f"verdict: {verdict}", extra={"job": run, "dataset": dataset, "fields": {
        k: fields[k] for k in ("verdict", "challenger_loss", "champion_loss", "champion_run")}})
    return fields


def publish_result(cfg: TrainerConfig, job: JobDir, doc: dict[str, Any], storage: Storage,
                   pubsub: PubSub | None = None) -> bool:
    """Announces the finished run once (``landfall.core.results.announce``); True if this call published.

    ``doc`` is the final ``metrics.json`` (status ``succeeded`` or ``failed``). Only a ``gs://`` job dir is
    announced (a workstation run into a local folder is not a job of the system). A failure the TFJob will
    retry (``retryable``) is not the end of the job: nothing is sent (the next attempt, or the reconciler
    once the TFJob ends Failed, announces it). Never raises: the result marker stays
    incomplete or absent and the reconciler sends it once the TFJob has finished."""
    status = doc.get("status")
    if not cfg.results_topic or status not in results.STATUSES or not is_gs(job.uri):
        return False  # a workstation run into a local folder is no job of the system: nobody listens
    if status == "failed" and doc.get("retryable"):
        return False
    run = str(doc.get("job") or job.uri.rstrip("/").rsplit("/", 1)[-1])
    try:
        message = results.from_metrics(doc, job=run, dataset=str(doc.get("dataset") or ""), status=status,
                                       inputs_uri=inputs_uri(cfg.manifests), storage=storage, published_by="chief")
        return results.announce(storage, pubsub or PubSub(cfg.project), cfg.results_topic, job.uri, message)
    except Exception as exc:  # the run is over either way: the reconciler is the backstop
        log.warning(f"result not published ({exc}); the reconciler sends it once the job has finished",
                    extra={"job": run, "fields": {"topic": cfg.results_topic}})
        return False
