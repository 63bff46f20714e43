"""Training to convergence: ``training.epochs`` is a ceiling, the held-out loss decides when to stop.

The rule (``trainer.config.Rule``, a setting: from ``training.early_stopping`` in a dataset spec or
``LANDFALL_EARLY_STOPPING_*``; what they leave unset ``Rule.auto`` fills for the run's ceiling: patience 10 % and
smoothing 5 % of it):
- the monitored value is ``val_loss``, the held-out loss every worker computes identically under
  MultiWorkerMirroredStrategy (Keras all-reduces it), so every worker takes the same decision at the same
  epoch and none is left waiting in a collective;
- the rule judges the *trend*, not single epochs: the monitored value after an epoch is the mean ``val_loss``
  of the last ``smoothing`` epochs (fewer at the start; epochs without a finite value are left out). The held-out
  loss of a small or noisy dataset jumps by several percent from one epoch to the next while its trend falls by a
  fraction of a percent (measured on Daphnet, ``landfall bench train --convergence``): judged epoch by epoch, one
  lucky epoch sets a mark the next ``patience`` epochs do not beat, and the run stops while it is still
  learning; the mean over a few epochs moves with the trend and flattens only when the trend does.
  ``smoothing`` 1 is Keras's ``EarlyStopping`` (the single epoch);
- an epoch *improves* when the monitored value is below the last improvement's by more than ``min_delta`` of
  it: ``min_delta`` is a *fraction* (Keras's ``EarlyStopping`` takes an absolute one; a fraction fits every
  dataset whatever its units and scale): 0.005 asks for 0.5 % less than the last improvement;
- and by more than ``min_gain`` of what the run has gained so far (the first monitored value minus the last
  improvement's): a loss that falls geometrically improves by its 0.5 % every epoch for ever, long after the
  detector has stopped changing: on NAB's recordings (docs/trainer.md, issue #47) the dense model's held-out loss
  was still falling by 1-3 % an epoch at epoch 60, 97-99 % of the way down, its detection the same at the epoch
  this rule stops. 0 judges by ``min_delta`` alone;
- epochs before ``start_from_epoch`` are not monitored (as Keras's ``start_from_epoch``): a warm start's or a
  fresh model's first epochs may be noisy;
- after ``patience`` epochs in a row without improvement the run is on a plateau: while it has learning-rate
  reductions left (``reductions``, default 0: opt-in) the learning rate is multiplied by ``factor`` (0.3) and the count
  starts again (as Keras's ``ReduceLROnPlateau``: a smaller step settles into the minimum the noisy large one
  kept jumping over); with none left the run stops. ``patience`` 0 turns the rule off (the run trains to the
  ceiling at its learning rate, and still ends with its best epoch's weights).
Whatever ends the run, the ceiling or the rule, the model saved, judged by the verdict and warm-started from
is the *best* epoch's (the lowest ``val_loss``), not the last one's. A run without held-out data (no
validation step) has nothing to monitor: it trains to the ceiling and keeps its last weights.

Surviving restarts exactly. Keras's ``BackupAndRestore`` restores the weights, the optimizer and the epoch,
but not ``EarlyStopping``'s best value, wait count or best weights (keras-team/tf-keras#430, closed
wontfix), so a naive ``EarlyStopping`` forgets after every restart what it had seen. Here the whole state
(``State``: every epoch's monitored value, the best value and epoch, the wait count, whether the run
stopped) is written after every epoch *into the backup folder*, beside the checkpoint, as
``landfall-stopping-<epochs>.json`` (the state after that many epochs), and the best weights as
``landfall-best-<epoch>.npz`` whenever a new best is reached. The chief mirrors that folder after every epoch
with the checkpoint pointer last (``trainer.jobdir.JobDir.mirror_up``), so whenever the job dir's checkpoint
says "after epoch R", the state after epoch R is there too; the previous epoch's state and best weights are
kept until the next epoch is mirrored, so a restart that finds the older checkpoint finds its state as well.
A restarted worker reads the state of the epoch its checkpoint restored, and carries on exactly as the
uninterrupted run would have: same wait count, same best value, same best weights, same stopping epoch.
A run killed after it decided to stop but before its model was saved does not train again: the restored
state says it stopped, the callback raises ``Converged`` before the first step, and the trainer saves the best
weights.

What the run records (``metrics.json``, the result message, ``landfall status``, the report): ``epochs_run``,
``stopped_early``, ``best_epoch``, ``best_val_loss``, ``epochs_ceiling``, and, once the cost is known
(``trainer.task.record_cost``), ``ceiling_gpu_seconds``: what the ceiling would have cost.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from trainer.config import Rule

STATE_PREFIX = "landfall-stopping-"
BEST_PREFIX = "landfall-best-"
_STATE_RE = re.compile(rf"^{STATE_PREFIX}(\d+)\.json$")
_BEST_RE = re.compile(rf"^{BEST_PREFIX}(\d+)\.npz$")


class Converged(Exception):
    """Raised by ``ConvergenceStop`` before the first step of a restarted run that had already stopped."""


@dataclasses.dataclass
class State:
    """Everything the rule has seen after ``epochs`` epochs; pure, JSON round-trips exactly."""

    epochs: int = 0
    values: list[float | None] = dataclasses.field(default_factory=list)  # val_loss of epochs 1..epochs
    best: float | None = None  # the lowest val_loss: its epoch's weights are the ones kept
    best_epoch: int | None = None  # 1-based
    reference: float | None = None  # the monitored value at the last improvement by min_delta: patience counts from it
    first: float | None = None  # the first monitored value: the run's gain is first - reference
    wait: int = 0
    reduced: int = 0  # learning-rate reductions made: the rate in force is the initial one x factor ** reduced
    reduced_at: list[int] = dataclasses.field(default_factory=list)  # after which epochs
    stopped: bool = False

    def update(self, rule: Rule, value: float | None) -> bool:
        """Records the next epoch's ``value``; returns True when the run should stop after it."""
        self.epochs += 1
        ok = value is not None and math.isfinite(value)
        self.values.append(float(value) if ok else None)
        if self.epochs <= rule.start_from_epoch or not ok:
            return False
        assert value is not None
        if self.best is None or value < self.best:  # the lowest so far: its weights are kept, improved or not
            self.best, self.best_epoch = float(value), self.epochs
        monitored = self.monitored(rule)
        if self.first is None:
            self.first = monitored
        gain = max(0.0, self.first - self.reference) if self.reference is not None else 0.0
        if self.reference is None or monitored < self.reference - max(abs(self.reference) * rule.min_delta,
                                                                      gain * rule.min_gain):
            self.reference, self.wait = monitored, 0
        else:
            self.wait += 1
        if rule.active and self.wait >= rule.patience:
            if self.reduced < rule.reductions:  # a plateau: a smaller step first
                self.reduced += 1
                self.reduced_at.append(self.epochs)
                self.wait = 0
            else:
                self.stopped = True
        return self.stopped

    def monitored(self, rule: Rule) -> float:
        """The value the rule judges after this state's epochs: the mean of the last ``rule.smoothing`` finite
        values (from ``start_from_epoch`` on; the latest epoch's value is finite when this is called)."""
        first = max(rule.start_from_epoch, self.epochs - rule.smoothing)
        window = [v for v in self.values[first:] if v is not None]
        return float(sum(window) / len(window))

    def learning_rate(self, rule: Rule, initial: float) -> float:
        """The learning rate in force after this state's epochs."""
        return float(initial * rule.factor ** self.reduced)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> State:
        doc = json.loads(text)
        return cls(**{f.name: doc[f.name] for f in dataclasses.fields(cls) if f.name in doc})


def state_path(folder: Path, epochs: int) -> Path:
    return folder / f"{STATE_PREFIX}{epochs}.json"


def best_path(folder: Path, epoch: int) -> Path:
    return folder / f"{BEST_PREFIX}{epoch}.npz"


def read_state(folder: Path, epochs: int) -> State | None:
    """The state after ``epochs`` epochs from ``folder`` (a restored backup); None when it holds none."""
    if epochs <= 0:
        return State()
    path = state_path(folder, epochs)
    if not path.exists():
        return None
    return State.from_json(path.read_text())


def latest_state(folder: Path) -> State | None:
    """The state of the most epochs in ``folder`` (a restored backup), or None."""
    found = [int(m.group(1)) for p in folder.glob(f"{STATE_PREFIX}*.json") if (m := _STATE_RE.match(p.name))]
    return read_state(folder, max(found)) if found else None


def read_best(folder: Path, epoch: int) -> list[np.ndarray] | None:
    path = best_path(folder, epoch)
    if not path.exists():
        return None
    with np.load(path) as npz:
        return [npz[f"arr_{i}"] for i in range(len(npz.files))]


def write(folder: Path, state: State, best_weights: list[np.ndarray] | None, previous: State | None) -> None:
    """Writes the state after ``state.epochs`` epochs (and the best weights, when this epoch is the new best),
    then removes what neither this state nor the previous epoch's (still the restore point until the next
    mirror) needs. Each file is written whole, then renamed into place."""
    folder.mkdir(parents=True, exist_ok=True)
    if best_weights is not None and state.best_epoch == state.epochs:
        _atomic(best_path(folder, state.epochs), lambda f: np.savez(f, *best_weights))
    _atomic(state_path(folder, state.epochs), lambda f: f.write(state.to_json().encode()))
    keep_states = {state.epochs, state.epochs - 1}
    keep_best = {s.best_epoch for s in (state, previous) if s is not None and s.best_epoch}
    for p in folder.iterdir():
        m = _STATE_RE.match(p.name)
        if m and int(m.group(1)) not in keep_states:
            p.unlink(missing_ok=True)
        m = _BEST_RE.match(p.name)
        if m and int(m.group(1)) not in keep_best:
            p.unlink(missing_ok=True)


def _atomic(path: Path, write_to) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        write_to(f)
    os.replace(tmp, path)


def summary(rule: Rule, state: State, ceiling: int, monitored: bool) -> dict[str, Any]:
    """The fields ``metrics.json`` records once training ended."""
    return {"epochs_run": state.epochs, "epochs_ceiling": ceiling, "lr_reduced_after": list(state.reduced_at),
            "stopped_early": bool(state.stopped and state.epochs < ceiling),
            "best_epoch": state.best_epoch if monitored else None,
            "best_val_loss": state.best if monitored else None,
            "early_stopping": {**rule.describe(), "monitored": monitored}}
