"""Train the seed's recurrent autoencoder from Landfall manifests, data-parallel across TFJob workers.

Runs as ``python -m trainer.task ...`` in each worker of a TFJob and as ``landfall train ...`` on a
workstation. Every flag also reads ``LANDFALL_<FLAG>`` from the environment (flags win).

Flags
    --inputs URI              a job's inputs.json (landfall.inputs/v1): what the submit stage released
                              the TFJob with; its manifests are used
    --manifest URI            a manifest.json, or a dataset prefix whose live (not retracted) manifests
                              are all used; repeatable (LANDFALL_MANIFESTS: comma separated or a JSON list)
    --job-dir URI             gs://bucket/runs/<job> or a local folder (required)
    --job-name NAME           default: LANDFALL_JOB_NAME, else the last path segment of --job-dir
    --epochs N                the ceiling: at most this many epochs (a restarted job continues to the same
                              total); the run stops earlier once the held-out loss stops improving
    --early-stopping-patience P, --early-stopping-min-delta D, --early-stopping-min-gain G,
    --early-stopping-start-from-epoch S,
    --early-stopping-reductions R, --early-stopping-factor F, --early-stopping-smoothing K
                              the stopping rule (``trainer.training.stopping``; patience 0: train to the ceiling)
    --min-skill S             promoted only when 1 - loss / baseline loss >= S (``trainer.judging.floor``)
    --labelled URI            a labelled set (``landfall.core.artifacts.labelled``) the verdict scores: precision,
    recall,
                              average precision of challenger and champion (``trainer.judging.labelled_check``)
    --min-average-precision A promoted only at average precision >= A on --labelled (else low_average_precision)
    --[no-]deterministic      every epoch's input order a function of (seed, worker, epoch)
    --batch-size-per-worker B default 1024 as in the seed; global batch = B x workers
    --learning-rate, --validation-fraction, --seed, --holdout random|segment|blocks (landfall.core.rules.holdout)
    --units 128,32 --dropout 0.2 --timesteps 36 --features 10   the model (seed defaults)
    --[no-]normalize          per-feature (x - mean) / std from the manifests' stats (default on)
    --[no-]exclude-flagged    the new arrivals' instances the dataset's champion flags are left out of training
                              and the held-out set (``trainer.judging.champion_view``; spec training.exclude_flagged)
    --warm-start auto|none|URI  initial weights: auto (default) the dataset's newest succeeded model, found
                              from the predecessor named in --inputs; none; or a model folder or job dir
                              (see ``trainer.training.warmstart``); recorded in metrics.json as warm_start_from
    --shuffle-buffer, --download-workers, --work-dir, --[no-]verify-crc32c   input pipeline
    --collective auto|ring|nccl, --collective-timeout-s   distribution (several workers; one worker trains under
                              TensorFlow's default strategy, trainer.train.strategy_kind)
    --steps-per-execution N   optimizer steps per call into TensorFlow (Keras's compile option; default 1)
    --health-check-interval-s accepted and ignored: TensorFlow 2.21's coordination service finds a
                              dead peer by its missed heartbeats (10 s) whatever this says
    --verbose 0|1|2           Keras progress on stderr (default 2: one line per epoch)

Cluster
    ``TF_CONFIG`` as the Kubeflow training operator sets it ({"cluster": {"worker": [host:port, ...]},
    "task": {"type": "worker", "index": i}}) selects MultiWorkerMirroredStrategy across the workers;
    without it the trainer is one process. Worker 0 is the chief: it alone writes metrics, the
    model and the checkpoint mirror; the others save to temporary folders, as the strategy requires
    every worker to take part in saving.

Exit codes (a TFJob restart policy ``ExitCode`` retries 128 and up, never 1-127)
    0    trained (or the job dir already holds a finished run of the same length)
    1    unexpected error (a bug: not retried)
    2    bad arguments or TF_CONFIG
    3    invalid input: a manifest whose shape or dtype disagrees with the model, a corrupt record,
         a shard that disagrees with its manifest, too little data for one batch
    4    not found: a manifest or a shard it lists does not exist
    128  storage or its credentials temporarily unreachable: Cloud Storage 429/5xx or connection
         errors, the metadata server's token fetch failing (Workload Identity not ready yet) (retry)
    129  the cluster failed: a peer worker died (while the cluster formed or after) or a collective
         timed out, in any phase (restart all workers)
    143  preempted: SIGTERM while training (a Spot node's notice); the epoch in progress was finished and saved,
         every worker stops (restart all workers; ``trainer.training.preemption``)
    A worker killed by a signal is retried by the operator as well. Every phase (manifests, warm start,
    staging, strategy, model build and variable broadcast, fit, saving, the verdict) is classed by the one table in
    ``trainer.errors``; the failed phase is logged and recorded in metrics.json (``failed_phase``).

Verdict and result (see ``trainer.judging.verdict``)
    After saving, the chief evaluates the model against its dataset's champion on its held-out share
    (MSE in original units), writes model/threshold.json, promotes it or keeps the champion
    (models/<dataset>/champion.json, generation-guarded) and records ``verdict`` in metrics.json; at the
    very end it publishes the run's one landfall.result/v1 message (guarded by runs/<job>/result.json).

Job dir (see ``trainer.jobdir``)
    metrics.json (landfall.metrics/v1, rewritten atomically after every epoch; once the run ended also
    ``gpu_seconds`` = workers x LANDFALL_GPUS_PER_WORKER x wall time from the first start, ``accelerator``
    (LANDFALL_ACCELERATOR) and ``estimated_cost`` in USD from ``landfall.core.rules.accelerators.prices()``),
    attempts.json,
    backup/ (BackupAndRestore: a restarted job resumes after its last finished epoch),
    tensorboard/, model/ (SavedModel + normalization.json + weights.npz, which a later job's warm start
    reads). Every epoch entry of metrics.json records the examples and training time of every worker
    (``examples_per_worker``, ``train_s_per_worker``, ``slowest_worker``); ``instances.arrivals`` the
    instances of each arrival; ``warm_start_from`` and ``warm_start`` where the weights came from and why.

Why staging goes through the storage wrapper
    TensorFlow's own gs:// filesystem ignores STORAGE_EMULATOR_HOST, so it cannot read the local
    emulator, and it would be a second code path to Cloud Storage. Each worker therefore downloads
    only its own shards to local disk with parallel downloads through ``landfall.core.services.storage`` (checking
    size and crc32c against the manifest), trains from local files, and mirrors its checkpoint,
    TensorBoard events, metrics and model to the job dir with the same wrapper: one code path for
    Cloud Storage, the emulator and local disk.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from landfall.core import logs
from landfall.core.contracts import timeline as core_timeline
from landfall.core.contracts.messages import METRICS_SCHEMA, JobInputs, utc_now
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import cost, holdout
from landfall.core.rules.series_windows import COMBINE
from landfall.core.services.storage import Storage
from trainer import faults, stopwatch
from trainer.config import TrainerConfig
from trainer.errors import EXIT_BUG, EXIT_OK, EXIT_USAGE, exit_code, phase, phase_of
from trainer.jobdir import BACKUP, METRICS, JobDir
from trainer.judging import champion_view, verdict
from trainer.training import inputs as inputs_mod
from trainer.training import model_kinds, warmstart
from trainer.training.cluster import Cluster

log = logs.get("trainer.task")

# -- arguments ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="landfall train", description=__doc__.split("\n", 1)[0])
    a = p.add_argument
    a("--manifest", dest="manifests", action="append", metavar="URI",
      help="manifest.json URI or dataset prefix (repeatable)")
    a("--inputs", dest="manifests", action="append", metavar="URI",
      help="a job's inputs.json (landfall.inputs/v1), as the TFJob passes it")
    a("--job-dir", help="gs:// prefix or local folder for metrics, checkpoints and the model")
    a("--job-name")
    a("--epochs", type=int)
    a("--batch-size-per-worker", type=int)
    a("--learning-rate", type=float)
    a("--validation-fraction", type=float)
    a("--seed", type=int)
    a("--holdout", choices=list(holdout.MODES),
      help="random records; segment, one run per arrival with a gap of one window (overlapping windows); blocks")
    a("--units", type=lambda s: tuple(int(u) for u in s.split(",") if u.strip()), metavar="U1,U2")
    a("--dropout", type=float)
    a("--model-kind", choices=list(model_kinds.KINDS),
      help="; ".join(f"{name}: {kind.DESCRIPTION}" for name, kind in model_kinds.KINDS.items()))
    a("--timesteps", type=int)
    a("--features", type=int)
    a("--normalize", action=argparse.BooleanOptionalAction, default=None)
    a("--warm-start", metavar="auto|none|URI", help="initial weights (default auto: the newest succeeded model)")
    a("--shuffle-buffer", type=int)
    a("--download-workers", type=int)
    a("--verify-crc32c", action=argparse.BooleanOptionalAction, default=None)
    a("--work-dir", help="local scratch folder (default under $TMPDIR)")
    a("--collective", choices=["auto", "ring", "nccl"])
    a("--collective-timeout-s", type=float)
    a("--health-check-interval-s", type=float,
      help="ignored: the coordination service detects a dead peer by its missed heartbeats")
    a("--steps-per-execution", type=int, help="optimizer steps per call into TensorFlow (default 1)")
    a("--verbose", type=int, choices=[0, 1, 2])
    a("--promote-tolerance", type=float)
    a("--select", choices=["detection", "loss"],
      help="detection (default): promote the candidate, model or baseline, that detects best "
           "(trainer.judging.selection); loss: the model, by held-out reconstruction loss")
    a("--promote-margin", type=float, help="select detection: promoted at the champion's score + this (default 0.01)")
    a("--model-margin", type=float,
      help="select detection: the model ranks above a baseline only when it scores this much more (default 0.01)")
    a("--combine", choices=list(COMBINE),
      help="how the dataset's rows are scored (its spec's shape.window.combine; default mean): with row, the "
           "label-free choice is the nearest neighbour (trainer.judging.selection.basis)")
    a("--min-skill", type=float, help="promoted only at 1 - loss / baseline loss >= this (default 0.1)")
    a("--min-skill-over", metavar="NAME=MARGIN[,...]|none",
      help="promoted only at 1 - loss / that baseline's loss >= MARGIN, for pca and nearest_neighbour "
           "(default none: reported, not gated)")
    a("--min-steps-per-epoch", type=int,
      help="a small dataset's batch is lowered (not below 32) until an epoch has this many steps (default 16; 0: off)")
    a("--early-stopping-patience", type=int, help="epochs without improvement before stopping; 0: train to --epochs")
    a("--early-stopping-min-delta", type=float, help="an improvement: val_loss lower by this fraction")
    a("--early-stopping-min-gain", type=float, help="... and by this fraction of the run's gain so far")
    a("--early-stopping-start-from-epoch", type=int, help="epochs before the held-out loss is monitored")
    a("--early-stopping-reductions", type=int, help="plateaus met by lowering the learning rate before stopping")
    a("--early-stopping-factor", type=float, help="the learning rate is multiplied by this at each reduction")
    a("--early-stopping-smoothing", type=int, help="the rule judges the mean val_loss of this many last epochs")
    a("--deterministic", action=argparse.BooleanOptionalAction, default=None,
      help="each epoch's input order a function of (seed, worker, epoch): a restart replays exactly")
    a("--exclude-flagged", action=argparse.BooleanOptionalAction, default=None,
      help="leave out of training and the held-out set the new instances the champion flags "
           "(trainer.judging.champion_view)")
    a("--threshold-quantile", type=float)
    a("--labelled", metavar="URI",
      help="a labelled evaluation set (landfall.core.artifacts.labelled), scored by the verdict")
    a("--min-average-precision", type=float, help="promote only at this average precision on --labelled, or above")
    a("--min-average-precision-over-baselines", type=float, metavar="M",
      help="promote only at an average precision on --labelled >= the best baseline's + M")
    a("--spec-generation", type=int, help="the dataset spec generation the job was rendered from (recorded)")
    return p


def parse_config(argv: list[str], env: dict[str, str] | None = None) -> TrainerConfig:
    """Raises ``SystemExit(2)`` (argparse) or ``ValueError`` for bad arguments."""
    ns = build_parser().parse_args(argv)
    flags = {k: v for k, v in vars(ns).items() if v is not None}
    if "manifests" in flags:
        flags["manifests"] = tuple(flags["manifests"])
    cfg = TrainerConfig.load(env, **flags)
    if not cfg.manifests:
        raise ValueError("--inputs or --manifest is required (an inputs.json, a manifest.json or a dataset prefix)")
    if not cfg.job_dir:
        raise ValueError("--job-dir is required (a gs:// prefix or a local folder)")
    return cfg


def job_name_of(cfg: TrainerConfig) -> str:
    return cfg.job_name or cfg.job_dir.rstrip("/").rsplit("/", 1)[-1] or "job"


def work_dir_of(cfg: TrainerConfig, cluster: Cluster) -> Path:
    if cfg.work_dir:
        base = Path(cfg.work_dir)
    else:
        digest = hashlib.sha256(cfg.job_dir.encode()).hexdigest()[:8]
        base = Path(tempfile.gettempdir()) / "landfall-trainer" / f"{job_name_of(cfg)}-{digest}"
    return base / f"worker-{cluster.worker_index}"


# -- metrics --------------------------------------------------------------------------------------


class Metrics:
    """``<job-dir>/metrics.json``: written by the chief only, atomically, after every change."""

    def __init__(self, job: JobDir, doc: dict[str, Any], enabled: bool):
        self.job = job
        self.doc = doc
        self.enabled = enabled

    def save(self) -> None:
        if self.enabled:
            stopwatch.into(self.doc, int(self.doc.get("num_workers") or 1))  # each phase's start and seconds (#42)
            self.job.write_json(METRICS, self.doc)

    def update(self, **fields: Any) -> None:
        self.doc.update(fields)
        self.save()


def base_metrics(cfg: TrainerConfig, cluster: Cluster, manifests: list[str], datasets: list[str]) -> dict:
    return {
        "schema": METRICS_SCHEMA,
        "job": job_name_of(cfg),
        "job_dir": cfg.job_dir,
        "dataset": ",".join(datasets),
        "manifests": manifests,
        "num_workers": cluster.num_workers,
        "batch_size_per_worker": cfg.batch_size_per_worker,
        "global_batch_size": cfg.batch_size_per_worker * cluster.num_workers,
        "learning_rate": cfg.learning_rate,
        "units": list(cfg.units),
        "spec_generation": cfg.spec_generation,
        "epochs": [],
        "epochs_requested": cfg.epochs,
        "restarts": 0,
        "started_at": utc_now(),
        "ended_at": None,
        "status": "running",
    }


# -- the run --------------------------------------------------------------------------------------


def record_cost(cfg: TrainerConfig, metrics: Metrics) -> None:
    """The chief's ``gpu_seconds`` (workers x GPUs per worker x the job's wall time, from its first start to its
    end, restarts included), ``accelerator`` and ``estimated_cost`` (``landfall.core.rules.cost``), once it ended."""
    doc = metrics.doc
    wall = cost.wall_s(doc.get("started_at"), doc.get("ended_at"))
    if wall is None:
        return
    try:
        fields = cost.fields(int(doc.get("num_workers") or 1), cfg.gpus_per_worker, wall, cfg.accelerator, "chief")
        metrics.update(**fields, **ceiling_cost(doc, fields["gpu_seconds"]),
                       **core_timeline.gpu_fields(doc, fields["gpu_seconds"]))
    except Exception as exc:  # the run is over either way; the submit stage estimates what is missing
        log.warning(f"could not record the cost in {METRICS}: {exc}")


def ceiling_cost(doc: dict[str, Any], gpu_seconds: float | None) -> dict[str, Any]:
    """``ceiling_gpu_seconds``: what the run would have cost had it trained to the ceiling. The epochs it did not
    run are priced at the median wall time of the epochs it ran, on the same GPUs; ``saved_gpu_seconds`` is the
    difference. Nothing when the run did not stop early."""
    if not doc.get("stopped_early") or gpu_seconds is None:
        return {"ceiling_gpu_seconds": gpu_seconds, "saved_gpu_seconds": 0.0 if gpu_seconds is not None else None}
    epochs = [float(e["wall_s"]) for e in doc.get("epochs") or [] if isinstance(e.get("wall_s"), int | float)]
    ceiling, ran = int(doc.get("epochs_ceiling") or doc.get("epochs_requested") or 0), len(epochs)
    wall = cost.wall_s(doc.get("started_at"), doc.get("ended_at")) or 0.0
    if not epochs or ceiling <= ran or wall <= 0:
        return {"ceiling_gpu_seconds": gpu_seconds, "saved_gpu_seconds": 0.0}
    per_second = gpu_seconds / wall  # GPUs held: workers x GPUs per worker
    saved = (ceiling - ran) * sorted(epochs)[len(epochs) // 2] * per_second
    return {"ceiling_gpu_seconds": round(gpu_seconds + saved, 3), "saved_gpu_seconds": round(saved, 3)}


def already_done(job: JobDir, cfg: TrainerConfig) -> bool:
    """The job dir holds a finished run of this ceiling: all its epochs, or fewer because it converged."""
    doc = job.read_json(METRICS) or {}
    return (doc.get("status") == "succeeded" and doc.get("epochs_requested") == cfg.epochs
            and (len(doc.get("epochs") or []) >= cfg.epochs or bool(doc.get("stopped_early"))))


def arrival_latency_s(storage: Storage, args: list[str] | tuple[str, ...], now: datetime | None = None) -> float | None:
    """Seconds from the oldest data arrival a released job covers (its ``inputs.json`` requests' ``arrived_at``,
    reason ``arrival``) to now; ``None`` without a released job's inputs or such a request."""
    uri = inputs_mod.inputs_uri(args)
    if uri is None:
        return None
    try:
        requests = JobInputs.from_json(storage.read_bytes(uri), uri).requests
    except (NotFound, Invalid):
        return None
    times = []
    for r in requests:
        if r.get("reason", "arrival") == "arrival" and r.get("arrived_at"):
            with contextlib.suppress(ValueError):
                times.append(datetime.fromisoformat(str(r["arrived_at"])))
    if not times:
        return None
    return round(((now or datetime.now(UTC)) - min(times)).total_seconds(), 3)


def log_started(cfg: TrainerConfig, storage: Storage, datasets: list[str]) -> None:
    """The chief's ``job started`` line, once per job (before its first metrics.json): how long its oldest
    arrival waited for training to begin (queueing in Kueue included): the log-based metric
    ``landfall-arrival-to-start`` (infra/modules/monitoring) reads ``arrival_latency_s``."""
    fields: dict[str, Any] = {"worker": 0}
    latency = arrival_latency_s(storage, cfg.manifests)
    if latency is not None:
        fields["arrival_latency_s"] = latency
    log.info("job started", extra={"job": job_name_of(cfg), "dataset": ",".join(datasets), "fields": fields})


def run(cfg: TrainerConfig, cluster: Cluster, storage: Storage, job: JobDir, metrics: Metrics) -> int:
    """Each step runs in a ``phase``: what fails in it leaves classed (``trainer.errors``)."""
    fields = {"worker": cluster.worker_index, "num_workers": cluster.num_workers}
    with phase("reading the manifests"):  # the first storage call: the first token fetch
        inputs = inputs_mod.load_manifests(storage, cfg.manifests, cfg.shape)
        metrics.doc.update(dataset=",".join(inputs.datasets), manifests=list(inputs.manifest_uris))
        plan = inputs_mod.plan_inputs(inputs, cluster.num_workers, cluster.worker_index, cfg.batch_size_per_worker,
                                      cfg.validation_fraction, cfg.seed, cfg.holdout,
                                      min_steps=cfg.min_steps_per_epoch)
        log.info("input plan", extra={"fields": {**fields, **inputs_mod.steps_summary(plan)}})
    with phase("reading the job dir"):
        if cluster.is_chief and job.read_json(METRICS) is None:  # this job's first start
            log_started(cfg, storage, inputs.datasets)
        done = already_done(job, cfg)
    if done:
        log.info("job dir already holds a finished run of this length; nothing to do", extra={"fields": fields})
        metrics.enabled = False
        if cluster.is_chief:  # a worker that died after the results were complete (#46): finish what it left
            with phase("finishing a finished run"):
                job.delete_tree(BACKUP)  # metrics.json is written before the backup goes (trainer.train.fit)
                verdict.publish_result(cfg, job, job.read_json(METRICS) or {}, storage)  # once: a no-op if sent
        return EXIT_OK
    work = work_dir_of(cfg, cluster)
    with phase("finding the warm start"):
        start = warmstart.resolve(cfg, storage)
        log.info(f"warm start: {start.model or 'none, fresh weights'} ({start.reason})",
                 extra={"fields": {**fields, **start.record()}})
        metrics.doc.update(start.record())
    with phase("staging the shards"):
        paths = inputs_mod.stage(storage, plan, work / "shards", cfg.download_workers, cfg.verify_crc32c)
        weights = warmstart.fetch(storage, start, work / "warm-start")
        mean, std = inputs.feature_stats() if cfg.normalize else (None, None)
    view = None
    if cluster.is_chief:  # before the strategy exists: no collective waits on it (trainer.judging.champion_view)
        with phase("scoring new data with the champion"):
            view = champion_view.in_child(cfg, storage, job, inputs, plan, paths, work, job_name_of(cfg))
            champion_view.publish(job, view)
            metrics.doc[champion_view.FIELD] = view.record
    if cfg.exclude_flagged:
        with phase("leaving out what the champion flagged"):
            flagged = view.flagged if view is not None else champion_view.wait_flagged(job, cfg.collective_timeout_s)
            plan, paths = champion_view.exclude(cfg, storage, inputs, plan, paths, work, flagged, cluster, metrics)

    with stopwatch.span("loading TensorFlow"):
        from trainer import train  # TensorFlow from here on

    return train.fit(cfg, cluster, job, metrics, plan, [str(p) for p in paths], work, mean, std, inputs,
                     start, weights)


def main(argv: list[str] | None = None) -> int:
    logs.setup()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = parse_config(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    except ValueError as exc:
        log.error(f"bad arguments: {exc}")
        return EXIT_USAGE
    try:
        cluster = Cluster.from_env()
    except Invalid as exc:
        log.error(str(exc))
        return EXIT_USAGE
    cluster.export()  # a JobSet pod: the TF_CONFIG built from its labels and JOB_COMPLETION_INDEX
    stopwatch.begin(cluster.worker_index)
    stopwatch.reset_others()
    storage = Storage()
    job = JobDir(storage, cfg.job_dir)
    metrics = Metrics(job, base_metrics(cfg, cluster, list(cfg.manifests), []), enabled=cluster.is_chief)
    started = time.monotonic()
    try:
        code = run(cfg, cluster, storage, job, metrics)
    except Exception as exc:  # classed where it happened (trainer.errors.phase): a code the TFJob can act on
        code = exit_code(exc)
        retryable = code >= 128
        failed_phase = phase_of(exc)
        where = f" while {failed_phase}" if failed_phase else ""
        fields = {"worker": cluster.worker_index, "exit_code": code, "retryable": retryable, "phase": failed_phase}
        if code == EXIT_BUG:
            log.exception(f"training failed{where}: {exc}", extra={"fields": fields})
        else:
            log.error(f"training failed{where}: {exc}", extra={"fields": fields})
        try:
            metrics.update(status="failed", ended_at=utc_now(), error=str(exc), retryable=retryable,
                           exit_code=code, failed_phase=failed_phase)
        except Exception as write_exc:
            log.warning(f"could not record the failure in {METRICS}: {write_exc}")
    if metrics.enabled:  # the chief announces the finished run once (a retryable failure is not the end)
        # the other workers' timelines: each writes its own as it exits, after the last collective (#42)
        stopwatch.gather(job, cluster.num_workers, wait_s=10.0 if metrics.doc.get("status") == "succeeded" else 0.0)
        record_cost(cfg, metrics)
        verdict.publish_result(cfg, job, metrics.doc, storage)
        faults.at(faults.ANNOUNCED)
    if not cluster.is_chief:
        stopwatch.publish(job, cluster.worker_index)
    log.info("trainer exits", extra={"fields": {"worker": cluster.worker_index, "exit_code": code,
                                                 "wall_s": round(time.monotonic() - started, 3)}})
    return code


def hard_exit(code: int) -> None:
    """Exits with ``code`` now, streams flushed: after MultiWorkerMirroredStrategy, gRPC threads can keep the
    interpreter from exiting (``python -m trainer.task`` and ``landfall train`` both end here)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    hard_exit(main())

