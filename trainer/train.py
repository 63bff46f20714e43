"""The TensorFlow half of the trainer: strategy, datasets, callbacks, ``fit``, saving.

Imported by ``trainer.task`` only after the manifests are validated and the shards staged, so bad
input fails fast without paying for TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import shutil
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from landfall.core import logs, scoring
from landfall.core.artifacts.champion import NORMALIZATION
from landfall.core.contracts.messages import utc_now
from landfall.core.contracts.timeline import EPOCH
from landfall.core.errors import Invalid
from trainer import faults, stopwatch
from trainer.config import Rule, TrainerConfig
from trainer.errors import phase
from trainer.jobdir import BACKUP, METRICS, MODEL, TENSORBOARD, JobDir
from trainer.judging import verdict
from trainer.training import iterators, pipeline, preemption, stopping, warmstart
from trainer.training import model as model_mod
from trainer.training.cluster import Cluster
from trainer.training.inputs import Inputs, Plan, arrival_counts

log = logs.get("trainer.train")

# Phases of ``fit``, each run in ``trainer.errors.phase``: what fails in one leaves classed.
STRATEGY = "creating the strategy"
ATTEMPT = "recording the attempt"
RESTORE = "restoring the backup"
BUILD = "building the model and broadcasting its variables"
FIT = "training"
SAVE = "saving the model"
EVALUATE = "evaluating against the champion"
FINISH = "recording the result"


# The strategy a job trains under, recorded in metrics.json (``strategy``) and the "cluster ready" log line (#50).
DEFAULT = "default"  # one worker, at most one GPU: TensorFlow's default strategy (no collective at all)
MIRRORED = "mirrored"  # one worker, several GPUs: MirroredStrategy over them
MULTI_WORKER = "multi_worker_mirrored"  # several workers: MultiWorkerMirroredStrategy


def strategy_kind(num_workers: int, gpus: int) -> str:
    """Which strategy costs least for this cluster. One worker needs no cross-host collective: under
    MultiWorkerMirroredStrategy a one-worker job still ran every step through the collective executor, at 0.35x to
    0.94x of plain Keras depending on the machine (issue #50). The default strategy places the model on the one GPU
    (or the CPU) as plain Keras does; ``BackupAndRestore`` supports it ("empty strategy") and ``MirroredStrategy``,
    not ``OneDeviceStrategy``, so those two are the choices on one worker."""
    if num_workers > 1:
        return MULTI_WORKER
    return MIRRORED if gpus > 1 else DEFAULT


def chosen_strategy(cluster: Cluster) -> str:
    """``strategy_kind`` for this process (the local GPUs counted only on one worker: MultiWorkerMirroredStrategy
    must be the first to set TensorFlow's context up)."""
    gpus = 0 if cluster.num_workers > 1 else len(tf.config.list_physical_devices("GPU"))
    return strategy_kind(cluster.num_workers, gpus)


def make_strategy(cfg: TrainerConfig, kind: str) -> tf.distribute.Strategy:
    """The strategy of ``kind``; MultiWorkerMirroredStrategy from ``TF_CONFIG`` on several workers.

    On several workers a barrier: returns once every worker has joined the coordination service, which from then
    on finds a dead peer by its missed heartbeats and aborts the collectives (UnavailableError).
    """
    if kind == DEFAULT:
        return tf.distribute.get_strategy()
    if kind == MIRRORED:
        return tf.distribute.MirroredStrategy()
    implementation = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[cfg.collective.lower()]
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation, timeout_seconds=cfg.collective_timeout_s or None
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


class FitMarks(keras.callbacks.Callback):
    """First in the callback list: the timeline's spans inside ``fit`` but outside the epochs (issue #42): Keras's
    set-up before ``on_train_begin``, the gap to the first epoch, after the last epoch to ``on_train_end``, the
    callbacks' ``on_train_end`` (until ``last``'s, the last in the list) and from there until ``fit`` returns
    (``done``: Keras lets go of the input pipelines' iterators)."""

    def __init__(self):
        super().__init__()
        self.called = self.began = self.ended = self.callbacks_ended = 0.0
        self.first = True
        marks = self

        class Last(keras.callbacks.Callback):
            def on_train_end(self, logs=None) -> None:
                marks.callbacks_ended = time.monotonic()
                if marks.ended:
                    stopwatch.current().add("the callbacks' end of training", marks.ended, marks.callbacks_ended)

        self.last = Last()

    def on_train_begin(self, logs=None) -> None:
        self.began = time.monotonic()
        stopwatch.current().add("keras set-up before training", self.called, self.began)

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        if self.first:
            self.first = False
            stopwatch.current().add("before the first epoch", self.began, time.monotonic())

    def on_train_end(self, logs=None) -> None:
        self.ended = time.monotonic()
        recorder = stopwatch.current()
        epochs = [p for p in recorder.spans if p["phase"] == EPOCH]
        if epochs:  # from where the last epoch's span ends (EpochReporter's, last in the list)
            recorder.add("after the last epoch", recorder.mono0 + epochs[-1]["start_s"] + epochs[-1]["seconds"],
                         self.ended)

    def done(self) -> None:
        if self.callbacks_ended:
            stopwatch.current().add("after training ended", self.callbacks_ended, time.monotonic())


class EpochTimer(keras.callbacks.Callback):
    """First in the callback list: training time per epoch, without validation or checkpointing."""

    def __init__(self):
        super().__init__()
        self.t0 = self.t_train = 0.0

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self.t0 = time.monotonic()
        self.t_train = 0.0

    def on_test_begin(self, logs=None) -> None:
        if not self.t_train:
            self.t_train = time.monotonic()

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if not self.t_train:
            self.t_train = time.monotonic()

    @property
    def train_s(self) -> float:
        return self.t_train - self.t0


def per_worker(strategy: tf.distribute.Strategy, num_workers: int, values: list[float]) -> list[list[float]]:
    """Every worker's ``values``, on every worker: one SUM all-reduce of a [workers, k] matrix in which each
    worker fills its own row (the first local replica of a worker only). A collective: every worker must
    call it at the same point, as every worker's callbacks do at the end of an epoch. One worker: its own row,
    no collective."""
    if num_workers == 1:
        return [[float(v) for v in values]]
    per = max(1, strategy.num_replicas_in_sync // num_workers)

    def mine(ctx: tf.distribute.experimental.ValueContext) -> tf.Tensor:
        rows = np.zeros((num_workers, len(values)), np.float64)
        if ctx.replica_id_in_sync_group % per == 0:
            rows[ctx.replica_id_in_sync_group // per] = values
        return tf.constant(rows)

    total = strategy.reduce(tf.distribute.ReduceOp.SUM,
                            strategy.experimental_distribute_values_from_function(mine), axis=None)
    return total.numpy().tolist()


class EpochReporter(keras.callbacks.Callback):
    """One JSON log line per epoch per worker; on the chief, mirrors the job dir and rewrites metrics.

    Each epoch's entry holds what every worker did (examples it trained on, its training time), gathered
    with one small all-reduce, so the job's record and the demo show the slowest worker, not the chief's.
    """

    def __init__(self, cluster: Cluster, job: JobDir, metrics, plan: Plan, work: Path, attempt: int,
                 timer: EpochTimer, strategy: tf.distribute.Strategy):
        super().__init__()
        self.strategy = strategy
        self.timer = timer
        self.cluster = cluster
        self.job = job
        self.metrics = metrics
        self.plan = plan
        self.work = work
        self.attempt = attempt
        self.first_epoch: int | None = None

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        if self.first_epoch is None:
            self.first_epoch = epoch
            done = [e for e in self.metrics.doc.get("epochs", []) if e.get("epoch", 0) <= epoch]
            self.metrics.doc["epochs"] = done
            if epoch > 0:
                log.info(f"resuming at epoch {epoch + 1} from the backup checkpoint",
                         extra={"fields": {"worker": self.cluster.worker_index, "epoch": epoch + 1}})
            self.metrics.save()

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        logs = logs or {}
        now = time.monotonic()
        # The epoch's steps from Keras's own count (no per-step hook: a hook that reads no logs still made Keras turn
        # each step's logs into numbers, one host sync per step, issue #50)
        steps = int(self.params.get("steps") or self.plan.steps_per_epoch)
        mine = [steps * self.plan.batch_size, self.timer.train_s, now - self.timer.t0]
        stopwatch.current().add(EPOCH, self.timer.t0, now, epoch=epoch + 1)  # metrics.json epochs[epoch]
        rows = per_worker(self.strategy, self.cluster.num_workers, mine)
        examples_per_worker = [int(r[0]) for r in rows]
        train_s = [round(r[1], 3) for r in rows]
        slowest = int(np.argmax(train_s))
        examples = sum(examples_per_worker)
        entry = {
            "epoch": epoch + 1,
            "loss": _num(logs.get("loss")),
            "val_loss": _num(logs.get("val_loss")),
            "wall_s": round(max(r[2] for r in rows), 3),
            "train_s": train_s[slowest],  # a synchronous step waits for the slowest worker
            "examples": examples,
            "examples_per_worker": examples_per_worker,
            "train_s_per_worker": train_s,
            "slowest_worker": slowest,
            "examples_per_s": round(examples / train_s[slowest], 1) if train_s[slowest] > 0 else None,
            "attempt": self.attempt,
            "finished_at": utc_now(),
        }
        shown = entry if self.cluster.is_chief else {k: v for k, v in entry.items() if k != "attempt"}
        log.info("epoch", extra={"fields": {"worker": self.cluster.worker_index, **shown}})
        if self.cluster.is_chief:
            # Checkpoint first, then metrics: metrics never claim an epoch the backup does not hold.
            self.job.mirror_up(self.work / "backup", BACKUP)
            self.job.mirror_up(self.work / "tensorboard", TENSORBOARD, last=())
            self.metrics.doc["epochs"].append(entry)
            self.metrics.save()


class ConvergenceStop(keras.callbacks.Callback):
    """The stopping rule of ``trainer.training.stopping``, after ``BackupAndRestore`` in the callback list: its state
    and best weights go into the backup folder after every epoch (mirrored by ``EpochReporter`` with the checkpoint
    pointer last), and a restarted run reads them back for the epoch its checkpoint restored.

    Every worker runs it on the same ``val_loss`` (all-reduced by Keras), so all stop at the same epoch. Reading
    or setting the weights is symmetric too: every worker does it at the same point (a BatchNormalization
    statistic is a sync-on-read variable, read with an all-reduce)."""

    def __init__(self, rule: Rule, folder: Path, monitored: bool, worker: int, learning_rate: float):
        super().__init__()
        self.rule, self.folder, self.monitored, self.worker = rule, folder, monitored, worker
        self.initial_lr = learning_rate
        self.state: stopping.State | None = None
        self.best_weights: list[np.ndarray] | None = None

    def _restore(self, epochs: int | None) -> None:
        """The state after ``epochs`` epochs (None: the latest in the backup: no epoch is left to run)."""
        state = stopping.read_state(self.folder, epochs) if epochs is not None else stopping.latest_state(self.folder)
        if state is None:  # a backup written before this rule existed: monitoring starts again from here
            state = stopping.State(epochs=epochs or 0, values=[None] * (epochs or 0))
            log.warning("no early-stopping state in the backup; the rule starts counting again",
                        extra={"fields": {"worker": self.worker, "epoch": epochs}})
        self.state = state
        if state.best_epoch:
            self.best_weights = stopping.read_best(self.folder, state.best_epoch)
        if state.reduced:  # the rate the state says is in force, whatever the optimizer's checkpoint held
            self._set_lr(state.learning_rate(self.rule, self.initial_lr))
        if state.epochs:
            log.info("early-stopping state restored", extra={"fields": {
                "worker": self.worker, "epochs": state.epochs, "best_epoch": state.best_epoch, "wait": state.wait,
                "stopped": state.stopped}})

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        if self.state is None:
            self._restore(epoch)
            if self.state is not None and self.state.stopped:
                raise stopping.Converged(f"the run stopped after epoch {self.state.epochs} before it was killed")

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        assert self.state is not None
        previous = dataclasses.replace(self.state, values=list(self.state.values))
        value = (logs or {}).get("val_loss") if self.monitored else None
        stop = self.state.update(self.rule, None if value is None else float(value))
        if self.state.reduced > previous.reduced:
            lr = self.state.learning_rate(self.rule, self.initial_lr)
            log.info(f"val_loss on a plateau for {self.rule.patience} epochs: learning rate lowered to {lr:.3g}",
                     extra={"fields": {"worker": self.worker, "epoch": self.state.epochs, "learning_rate": lr}})
            self._set_lr(lr)
        improved = self.state.best_epoch == self.state.epochs
        if improved:
            self.best_weights = self.model.get_weights()
        stopping.write(self.folder, self.state, self.best_weights if improved else None, previous)
        if stop:
            log.info(f"stopping after epoch {self.state.epochs}: val_loss did not improve by {self.rule.min_delta:g} "
                     f"for {self.rule.patience} epochs after {self.state.reduced} learning-rate reductions; keeping "
                     f"epoch {self.state.best_epoch}'s weights",
                     extra={"fields": {"worker": self.worker, "epoch": self.state.epochs,
                                       "best_epoch": self.state.best_epoch, "best_val_loss": self.state.best}})
            self.model.stop_training = True

    def _set_lr(self, lr: float) -> None:
        keras.backend.set_value(self.model.optimizer.learning_rate, lr)

    def on_train_end(self, logs=None) -> None:
        if self.state is None:  # no epoch left to run: the restored state is the last one
            self._restore(None)
        self.keep_best()

    def keep_best(self) -> None:
        """The best epoch's weights into the model, unless they are its weights already."""
        state = self.state
        if (self.monitored and state is not None and self.best_weights is not None and state.best_epoch
                and state.best_epoch != state.epochs):
            self.model.set_weights(self.best_weights)

    def summary(self, ceiling: int) -> dict:
        return stopping.summary(self.rule, self.state or stopping.State(), ceiling, self.monitored)


def restored_epochs(backup: Path) -> int:
    """How many epochs the backup's checkpoint holds (what ``BackupAndRestore`` resumes after): 0 without one.
    Its ``ckpt_saved_epoch`` is the 0-based index of the last finished epoch (tf_keras's WorkerTrainingState)."""
    latest = tf.train.latest_checkpoint(str(backup / "chief"))
    if latest is None:
        return 0
    names = [n for n, _ in tf.train.list_variables(latest) if n.startswith("ckpt_saved_epoch/")]
    if not names:
        raise Invalid(f"backup checkpoint {latest} holds no ckpt_saved_epoch (a tf_keras that saves otherwise)")
    saved = int(tf.train.load_variable(latest, names[0]))
    return saved + 1 if saved >= 0 else 0


def _units(model: keras.Model) -> list[int]:
    """The encoder's widths (the model's ``units``)."""
    return model_mod.encoder_units(model)


def _num(value) -> float | None:
    return None if value is None else float(value)


def fit(cfg: TrainerConfig, cluster: Cluster, job: JobDir, metrics, plan: Plan, paths: list[str], work: Path,
        mean, std, inputs: Inputs, start: warmstart.WarmStart | None = None, weights: Path | None = None) -> int:
    """Trains to ``cfg.epochs`` (resuming from the job dir's backup), saves the model and records the run."""
    fields = {"worker": cluster.worker_index}
    with phase(STRATEGY):
        if cfg.deterministic:  # cuDNN's GRU gradients and others have a deterministic kernel only when asked
            tf.config.experimental.enable_op_determinism()
        log.info("waiting for every worker to join the cluster", extra={"fields": fields})
        started = time.monotonic()
        kind = chosen_strategy(cluster)
        strategy = make_strategy(cfg, kind)
        sizes = batch_sizes(cfg, cluster, strategy, plan)
        log.info("cluster ready", extra={"fields": {**fields, "replicas": strategy.num_replicas_in_sync,
                                                    "strategy": kind,
                                                    "waited_s": round(time.monotonic() - started, 3)}})
    with phase(ATTEMPT):
        attempt = _start_attempt(cluster, job, metrics, strategy, plan, sizes, inputs, kind)
    with phase(RESTORE):
        backup, restored = _restore_backup(cluster, job, work)
    log.info("training", extra={"fields": {**fields, "replicas": strategy.num_replicas_in_sync,
                                           "global_batch_size": plan.global_batch_size, "attempt": attempt,
                                           "backup_files": restored}})
    with phase(BUILD):  # every variable's initial value is broadcast from worker 0: a collective
        keras.utils.set_random_seed(cfg.seed)
        with strategy.scope():
            model = model_mod.build_model(cfg.timesteps, cfg.features, cfg.units, cfg.dropout, cfg.learning_rate,
                                          cfg.model_kind, cfg.steps_per_execution)
        log.info("model built", extra={"fields": {**fields, "parameters": model.count_params()}})
        start = warm_start(model, start, weights, cluster, metrics)
    with phase(FIT):
        first_epoch = restored_epochs(backup) if cfg.deterministic else None
        with stopwatch.span("building the input pipelines"):
            train_ds, val_ds = _datasets(cfg, strategy, plan, paths, sizes, mean, std, inputs, first_epoch)
        # the training iterator is never destroyed (trainer.training.iterators: up to 60 s otherwise, and never
        # off-thread)
        made = iterators.Kept()
        train_ds = iterators.keeping(train_ds, made)
        timer, marks = EpochTimer(), FitMarks()
        converge = ConvergenceStop(cfg.stopping_rule(), backup, monitored=val_ds is not None,
                                   worker=cluster.worker_index, learning_rate=cfg.learning_rate)
        callbacks = [
            marks,
            timer,
            keras.callbacks.BackupAndRestore(str(backup), save_freq="epoch", delete_checkpoint=True),
            converge,
            keras.callbacks.TensorBoard(str(work / "tensorboard"), write_graph=False, profile_batch=0),
            EpochReporter(cluster, job, metrics, plan, work, attempt, timer, strategy),
            # after the epoch's backup is mirrored: SIGTERM (a Spot notice) stops every worker here (#41)
            preemption.PreemptionNotice(lambda row: per_worker(strategy, cluster.num_workers, row),
                                        cluster.worker_index, metrics, attempt),
            marks.last,
        ]
        try:
            marks.called = time.monotonic()
            model.fit(train_ds, epochs=cfg.epochs, steps_per_epoch=plan.steps_per_epoch, validation_data=val_ds,
                      validation_steps=sizes.val_steps or None, callbacks=callbacks, verbose=cfg.verbose)
        except stopping.Converged as done:  # restarted after it had decided to stop: nothing left to train
            log.info(f"{done}: saving its best weights", extra={"fields": fields})
            converge.keep_best()
        finally:
            made.park_all()
        marks.done()
        metrics.doc.update(converge.summary(cfg.epochs))
    with phase(SAVE):
        save_model(model, cluster, job, work, mean, std, inputs, start)
    faults.at(faults.SAVED)
    if cluster.is_chief:
        with phase(EVALUATE):  # the chief alone, on its saved copy (trainer.judging.verdict says why)
            metrics.doc.update(verdict.conclude(cfg, job, metrics, work / "model", plan, paths, inputs, mean, std,
                                                job.storage))
        faults.at(faults.EVALUATED)
        with phase(FINISH):
            # metrics.json first, the backup after: a crash between the two finds the results complete (a restart
            # exits 0, trainer.task.already_done) and leaves only a backup that the restart deletes
            metrics.update(status="succeeded", ended_at=utc_now(), model=job.path(MODEL),
                           tensorboard=job.path(TENSORBOARD))
            job.delete_tree(BACKUP)  # finished: a restart now finds metrics "succeeded" and does nothing
        faults.at(faults.FINISHED)
    log.info("training finished", extra={"fields": {**fields, **converge.summary(cfg.epochs)}})
    return 0


@dataclasses.dataclass(frozen=True)
class BatchSizes:
    per_worker: int  # local replicas per worker
    batch: int  # per replica
    val_batch: int  # per replica
    val_steps: int


def batch_sizes(cfg: TrainerConfig, cluster: Cluster, strategy: tf.distribute.Strategy, plan: Plan) -> BatchSizes:
    if strategy.num_replicas_in_sync % cluster.num_workers:
        raise Invalid(f"{strategy.num_replicas_in_sync} replicas do not split over {cluster.num_workers} workers")
    per_worker = strategy.num_replicas_in_sync // cluster.num_workers
    if cfg.batch_size_per_worker % per_worker:
        raise Invalid(f"--batch-size-per-worker {cfg.batch_size_per_worker} does not split over "
                      f"{per_worker} local replicas")
    if plan.batch_size < per_worker:  # a dataset smaller than one batch (plan_inputs): a record per replica at least
        raise Invalid(f"too little data: {min(plan.train_counts)} training instances per worker, fewer than its "
                      f"{per_worker} local replicas; add data")
    val_batch = plan.val_batch_size // per_worker
    val_steps = min(plan.val_counts) // (val_batch * per_worker) if val_batch else 0
    return BatchSizes(per_worker, plan.batch_size // per_worker, val_batch, val_steps)


def _start_attempt(cluster: Cluster, job: JobDir, metrics, strategy: tf.distribute.Strategy, plan: Plan,
                   sizes: BatchSizes, inputs: Inputs, kind: str) -> int:
    """The chief counts the attempt and carries a restarted run's epochs over; returns the attempt number."""
    if not cluster.is_chief:
        return 1
    attempt = job.next_attempt()
    if attempt > 1:
        previous = job.read_json(METRICS) or {}
        metrics.doc["epochs"] = list(previous.get("epochs") or [])
        metrics.doc["started_at"] = previous.get("started_at") or metrics.doc["started_at"]
        if previous.get(preemption.FIELD):  # the notices acted on before this attempt (#41)
            metrics.doc[preemption.FIELD] = list(previous[preemption.FIELD])
    metrics.doc.update(restarts=attempt - 1, status="running", ended_at=None, error=None, failed_phase=None,
                       replicas=strategy.num_replicas_in_sync, strategy=kind, steps_per_epoch=plan.steps_per_epoch,
                       validation_steps=sizes.val_steps, attempt=attempt,
                       instances={"total": inputs.count, "train": sum(plan.train_counts),
                                  "validation": sum(plan.val_counts),
                                  "per_worker_train": list(plan.train_counts),
                                  **_arrivals(arrival_counts(inputs, plan))})
    metrics.save()
    return attempt


ARRIVALS_LISTED = 1000  # metrics.json is rewritten every epoch: it must not grow with the dataset's history


def _arrivals(counts: list[dict]) -> dict:
    """Each arrival's instances, the first ``ARRIVALS_LISTED`` of them, and how many arrivals there are."""
    return {"arrivals": counts[:ARRIVALS_LISTED], "arrival_count": len(counts)}


def _restore_backup(cluster: Cluster, job: JobDir, work: Path) -> tuple[Path, int]:
    """Every worker reads the chief's checkpoint mirror to resume; the chief also its TensorBoard events."""
    backup = work / "backup"
    shutil.rmtree(backup, ignore_errors=True)
    shutil.rmtree(work / "tensorboard", ignore_errors=True)
    restored = job.mirror_down(BACKUP, backup)
    if cluster.is_chief:
        job.mirror_down(TENSORBOARD, work / "tensorboard")
    return backup, restored


def _datasets(cfg: TrainerConfig, strategy: tf.distribute.Strategy, plan: Plan, paths: list[str], sizes: BatchSizes,
              mean, std, inputs: Inputs, first_epoch: int | None = None
              ) -> tuple[tf.data.Dataset, tf.data.Dataset | None]:
    def train_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        return pipeline.train_dataset(plan, paths, inputs.shape, batch_size=sizes.batch,
                                  shuffle_buffer=cfg.shuffle_buffer, seed=cfg.seed, mean=mean, std=std,
                                  first_epoch=first_epoch)

    def val_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        return pipeline.validation_dataset(plan, paths, inputs.shape, batch_size=sizes.val_batch,
                                       num_batches=sizes.val_steps * sizes.per_worker, mean=mean, std=std)

    train_ds = strategy.distribute_datasets_from_function(train_fn)
    val_ds = strategy.distribute_datasets_from_function(val_fn) if sizes.val_steps else None
    return train_ds, val_ds


def warm_start(model: keras.Model, start: warmstart.WarmStart | None, weights: Path | None, cluster: Cluster,
               metrics) -> warmstart.WarmStart | None:
    """Sets the predecessor's weights when every array fits; ``auto`` starts fresh (and says why) otherwise.
    Every worker reads the same file, so the replicas agree without a broadcast."""
    if start is None or weights is None:
        return start
    with np.load(weights) as npz:
        arrays = [npz[f"arr_{i}"] for i in range(len(npz.files))]
    want = [tuple(w.shape) for w in model.weights]  # shapes only: reading values can be a collective
    have = [tuple(a.shape) for a in arrays]
    if want != have:
        why = f"{start.model}'s weights do not fit this model ({len(have)} arrays vs {len(want)}, shapes differ)"
        if start.mode == "uri":
            raise Invalid(f"--warm-start {why}")
        start = dataclasses.replace(start, model=None, reason=why)
        log.warning(f"warm start: fresh weights: {why}", extra={"fields": {"worker": cluster.worker_index}})
        if cluster.is_chief:
            metrics.update(**start.record())
        return start
    model.set_weights(arrays)
    log.info(f"warm start from {start.model}", extra={"fields": {"worker": cluster.worker_index}})
    return start


def save_served(model: keras.Model, local: Path, shape: tuple[int, int]) -> None:
    """The model as a SavedModel with the serving contract (``serving_default``: ``x`` ``[n, T, F]`` in,
    ``reconstruction`` out) that ``landfall.core.scoring`` loads; its statistics are the caller's to write."""
    spec = tf.TensorSpec([None, *shape], tf.float32, name="x")
    serve = tf.function(lambda x: {"reconstruction": model(x, training=False)}, input_signature=[spec])
    # save_traces=False: the layers are all built-in, so Keras reloads them from their config, and
    # saving skips re-tracing every layer (seconds per worker); serving gets one explicit signature.
    model.save(str(local), include_optimizer=False, save_traces=False, signatures={"serving_default": serve})


def save_model(model: keras.Model, cluster: Cluster, job: JobDir, work: Path, mean, std, inputs: Inputs,
               start: warmstart.WarmStart | None = None) -> None:
    """Every worker saves (the strategy requires it); only the chief's copy goes to the job dir."""
    local = work / ("model" if cluster.is_chief else f"model-tmp-{cluster.worker_index}")
    shutil.rmtree(local, ignore_errors=True)
    save_served(model, local, inputs.shape)
    # Every worker reads the weights: a BatchNormalization statistic is a sync-on-read variable, and
    # reading it is an all-reduce that the chief alone would wait on forever.
    weights = model.get_weights()
    if not cluster.is_chief:
        shutil.rmtree(local, ignore_errors=True)
        return
    np.savez(local / warmstart.WEIGHTS, *weights)  # what a later job's warm start reads
    (local / NORMALIZATION).write_text(json.dumps({
        "shape": list(inputs.shape), "dtype": "float32", "normalized": mean is not None,
        "mean": mean, "std": std, scoring.ERROR_SCALE: inputs.error_scale() if mean is not None else None,
        "units": [int(u) for u in _units(model)], "kind": model_mod.kind_of(model),
        # Even after a warm start the statistics are this job's inputs', not the predecessor's: the data
        # moved on, and the weights adapt within the first epoch.
        "statistics": "this job's inputs (count-weighted over its manifests)" if mean is not None else None,
        "warm_start_from": start.model if start else None,
    }, indent=2))
    job.mirror_up(local, MODEL, last=("saved_model.pb",))

