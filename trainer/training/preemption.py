"""What the trainer does with SIGTERM while it trains: a Spot node's preemption notice (issue #41).

GKE gives a preempted Spot VM's node 30 s; the kubelet's graceful node shutdown gives the non-system Pods the first
15 s of them (best effort), then SIGKILL (docs.cloud.google.com/kubernetes-engine/docs/concepts/spot-vms and
.../how-to/preemptible-vms, read 2026-12-03). The trainer's unit of exact resumption is the epoch: the backup
(``BackupAndRestore(save_freq="epoch")`` with the stopping rule's state, mirrored by the chief) holds finished
epochs only, and the deterministic input order restarts at an epoch's first batch. So on SIGTERM during ``fit``:

- the worker that got it keeps training to the end of the epoch in progress (no mid-epoch checkpoint: tf_keras's
  ``save_before_preemption``/``save_freq`` in steps would resume mid-epoch on batches the input order cannot
  replay, and the stopping rule and the epoch records are per epoch);
- at every epoch's end all workers all-reduce "has anyone had notice" (one small collective, as every worker's
  callbacks run at the same point), after the backup of that epoch is mirrored (this callback is the last one);
  if anyone has, every worker raises ``Preempted`` (exit 143: retryable under TFJob's ``ExitCode`` policy and
  JobSet's pod failure policy) and the engine restarts the job, which resumes at the next epoch: nothing repeated;
- if the epoch cannot end within ``GRACE_S`` of the notice, the worker exits 143 at once (SIGKILL is coming
  anyway): the steps of that epoch are lost, at most one epoch, as for a worker killed without notice.

Outside ``fit`` (staging, saving, the verdict) SIGTERM keeps its default: the process ends at once, as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import tf_keras as keras

from landfall.core import logs
from landfall.core.contracts.messages import utc_now
from trainer.errors import EXIT_PREEMPTED, Preempted

log = logs.get("trainer.training.preemption")

# Under the 15 s the kubelet gives a non-system Pod of a preempted Spot node: exit on our own before SIGKILL.
GRACE_S = float(os.environ.get("LANDFALL_PREEMPTION_GRACE_S", "12"))
FIELD = "preemptions"  # metrics.json: one entry per preemption notice acted on


class PreemptionNotice(keras.callbacks.Callback):
    """Last in ``fit``'s callback list. ``gather(values)`` is ``trainer.train.per_worker`` for this strategy: every
    worker's row, on every worker (a collective). The chief appends one entry to ``metrics.doc[FIELD]``."""

    def __init__(self, gather: Callable[[list[float]], list[list[float]]], worker: int, metrics, attempt: int,
                 grace_s: float = GRACE_S):
        super().__init__()
        # Its per-step hook reads no logs: without this Keras would turn every step's logs into numbers for it, a host
        # sync per step (issue #50)
        self._supports_tf_logs = True
        self.gather, self.worker, self.metrics, self.attempt, self.grace_s = gather, worker, metrics, attempt, grace_s
        self.noticed_at: float | None = None
        self.notice_step = 0
        self.steps = 0
        self.previous = None
        self.timer: threading.Timer | None = None

    # -- the signal ---------------------------------------------------------------------------------------------
    def _on_sigterm(self, signum, frame) -> None:
        if self.noticed_at is not None:
            return
        self.noticed_at, self.notice_step = time.monotonic(), self.steps
        log.warning(f"SIGTERM (preemption notice): finishing the epoch in progress, at most {self.grace_s:g} s",
                    extra={"fields": {"worker": self.worker, "step": self.steps}})
        self.timer = threading.Timer(self.grace_s, self._give_up)
        self.timer.daemon = True
        self.timer.start()

    def _give_up(self) -> None:
        log.warning(f"the epoch in progress did not end within {self.grace_s:g} s of SIGTERM: exiting, its steps are "
                    "lost", extra={"fields": {"worker": self.worker, "exit_code": EXIT_PREEMPTED}})
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(EXIT_PREEMPTED)

    def on_train_begin(self, logs=None) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._on_sigterm)

    def on_train_end(self, logs=None) -> None:
        self._restore()

    def _restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
            self.previous = None

    # -- the epochs ---------------------------------------------------------------------------------------------
    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self.steps = 0

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        self.steps = batch + 1  # the step's index in the epoch: called once per execution of steps_per_execution

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        noticed = self.noticed_at is not None
        waited = time.monotonic() - self.noticed_at if noticed else 0.0
        rows = self.gather([1.0 if noticed else 0.0, float(self.notice_step), waited])
        who = [i for i, r in enumerate(rows) if r[0] > 0]
        if not who:
            return
        first = who[0]
        entry = {
            "attempt": self.attempt,
            "worker": first,  # the (first) worker that had notice
            "workers": who,
            "epoch": epoch + 1,  # finished and in the backup: the restart resumes at the next one
            "notice_step": int(rows[first][1]),  # steps into that epoch when the notice came
            "steps_per_epoch": self.steps,
            "seconds_after_notice": round(rows[first][2], 3),  # to the end of the epoch, its backup mirrored
            "steps_lost": 0,  # the epoch was finished and saved: the restart repeats nothing
            "at": utc_now(),
        }
        log.warning(f"preempted: epoch {epoch + 1} is in the backup; exiting {EXIT_PREEMPTED} for a restart",
                    extra={"fields": {"worker": self.worker, **{k: v for k, v in entry.items()
                                                               if k != "at" and (k != "attempt" or self.worker == 0)}}})
        if self.metrics is not None and self.metrics.enabled:
            self.metrics.doc.setdefault(FIELD, []).append(entry)
            self.metrics.save()
        self.gather([0.0])  # a barrier: no worker exits (and has its peers stopped) before the chief has saved
        self._restore()  # from here SIGTERM ends the process at once again; the deadline still stands
        raise Preempted(f"preempted after epoch {epoch + 1} (notice on worker {first}): restart to resume")
