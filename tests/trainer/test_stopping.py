"""Training to convergence (``trainer.config.Rule``, ``trainer.training.stopping`` and
``trainer.train.ConvergenceStop``): the rule, its state surviving a restart exactly, the best epoch's weights kept, and
what the trainer records."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from landfall.core.artifacts import specs
from landfall.core.services.storage import Storage
from tests.trainer.helpers import make_array, run_trainer, write_dataset
from trainer import config
from trainer.config import Rule
from trainer.task import ceiling_cost
from trainer.training import stopping
from trainer.training.stopping import State

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPECS_SCHEMA = Path(specs.__file__).with_name("dataset-v1.schema.json")

# -- the rule, pure ---------------------------------------------------------------------------------------


def replay(rule: Rule, values: list[float | None]) -> State:
    state = State()
    for v in values:
        if state.update(rule, v):
            break
    return state


def test_patience_counts_epochs_without_a_relative_improvement():
    rule = Rule(patience=2, min_delta=0.01, reductions=0, smoothing=1)
    # 1.0 -> 0.95 improves (5 %); 0.949 is lower but by less than 1 % of 0.95: no improvement, though its
    # weights become the best; 0.948 again not: two in a row, stop after epoch 4.
    state = replay(rule, [1.0, 0.95, 0.949, 0.948, 0.5])
    assert (state.epochs, state.stopped, state.best_epoch, state.best, state.wait) == (4, True, 4, 0.948, 2)
    assert state.reference == 0.95
    # An improvement by more than min_delta resets the count.
    state = replay(rule, [1.0, 1.0, 0.5, 0.5, 0.5])
    assert (state.epochs, state.best_epoch) == (5, 3)


def test_a_geometric_decay_stops_once_its_steps_are_small_against_what_it_has_gained():
    """The dense model's held-out loss on NAB's recordings falls by a few per cent an epoch for ever (issue #47):
    judged by ``min_delta`` alone (0.5 % of itself) it never stops; ``min_gain`` asks each improvement for 1 % of
    what the run has gained since its first epoch, and the run stops once it is on the flat of its curve."""
    decay = [0.01 + 0.99 * 0.9 ** k for k in range(60)]  # 1.0 down toward its floor of 0.01
    alone = replay(Rule(patience=6, min_delta=0.005, min_gain=0.0, smoothing=3), decay)
    assert alone.epochs == 60 and not alone.stopped
    gained = replay(Rule(patience=6, min_delta=0.005, smoothing=3), decay)  # min_gain: the default, 0.01
    assert Rule().min_gain == 0.01 and gained.stopped and 40 < gained.epochs < 60, gained.epochs
    first = gained.values[0]
    assert first - gained.best > 0.99 * (first - 0.01)  # stopped with more than 99 % of what it could gain
    # Still learning fast: every epoch improves by far more than 1 % of the gain, the rule never fires.
    steep = [1.0 - 0.015 * k for k in range(60)]
    assert replay(Rule(patience=6, smoothing=3), steep).epochs == 60
    # A run whose loss rises from its first epoch has gained nothing: min_delta alone judges it.
    rising = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    assert replay(Rule(patience=3, smoothing=1), rising).epochs == 4
    with pytest.raises(ValueError):
        Rule(min_gain=1.0)


def test_smoothing_judges_the_trend_not_one_lucky_epoch():
    """A held-out loss falling 1 % an epoch under +-4 % of alternating noise, then flat: judged epoch by epoch,
    the first lucky epoch sets a mark the next ones do not beat and the run stops while it is still learning;
    the mean of the last 4 epochs moves with the trend and stops only once the trend is flat."""
    trend = [1.0 * 0.99 ** i for i in range(40)] + [0.99 ** 40] * 40
    noisy = [t * (1.04 if i % 4 == 1 else 0.96 if i % 4 == 3 else 1.0) for i, t in enumerate(trend)]
    single = replay(Rule(patience=3, min_delta=0.002, smoothing=1), noisy)
    mean4 = replay(Rule(patience=3, min_delta=0.002, smoothing=4), noisy)
    assert single.stopped and single.epochs < 20  # stopped on the noise, 20+ epochs of learning left
    assert mean4.stopped and 40 < mean4.epochs <= 50  # once the trend flattened (after epoch 40), within patience
    assert mean4.best == min(noisy[:mean4.epochs])  # the weights kept are still the best single epoch's
    # The monitored value: the mean of the last k finite values from start_from_epoch on.
    state = replay(Rule(patience=0, smoothing=3, start_from_epoch=1), [9.0, 1.0, None, 2.0, 4.0])
    assert state.monitored(Rule(smoothing=3, start_from_epoch=1)) == pytest.approx(3.0)  # (2 + 4) / 2: None left out
    assert replay(Rule(patience=0, smoothing=5, start_from_epoch=1), [9.0, 1.0, 3.0]).monitored(
        Rule(smoothing=5, start_from_epoch=1)) == pytest.approx(2.0)  # epoch 1 is before monitoring
    with pytest.raises(ValueError, match="smoothing"):
        Rule(smoothing=0)


def test_patience_and_smoothing_scale_with_the_ceiling_unless_given():
    """A job without a spec or flags runs ``Rule.auto`` for its ceiling: at 200 epochs the rule measured on the
    Daphnet convergence benchmark (docs/benchmarks.md), at the seed's 10 a short look."""
    from trainer.config import TrainerConfig

    assert TrainerConfig(epochs=200).stopping_rule() == Rule(patience=20, min_delta=0.005, smoothing=10) == Rule()
    assert TrainerConfig().stopping_rule() == Rule(patience=3, smoothing=1)  # the seed's 10 epochs
    assert TrainerConfig(epochs=80).stopping_rule() == Rule(patience=8, smoothing=4)
    given = TrainerConfig(epochs=200, early_stopping_patience=0, early_stopping_smoothing=2).stopping_rule()
    assert (given.patience, given.smoothing, given.active) == (0, 2, False)  # given: kept, 0 still turns it off
    assert TrainerConfig.load({"LANDFALL_EARLY_STOPPING_PATIENCE": "6"}, epochs=200).stopping_rule().patience == 6


def test_the_rules_defaults_are_written_once_and_what_repeats_them_agrees():
    """``trainer.config.Rule`` alone writes the rule's defaults: ``TrainerConfig`` leaves each of its fields unset
    (None). The pages and the spec's JSON Schema repeat them in words, checked against the rule here."""
    from trainer.config import TrainerConfig

    knobs = sorted(f.name.removeprefix("early_stopping_") for f in dataclasses.fields(TrainerConfig)
                   if f.name.startswith("early_stopping_"))
    assert knobs == sorted(f.name for f in dataclasses.fields(Rule))
    assert [getattr(TrainerConfig(), "early_stopping_" + k) for k in knobs] == [None] * len(knobs)
    rule, numbers = Rule(), ("min_delta", "min_gain", "start_from_epoch", "reductions", "factor")
    trainer_md, datasets_md = (DOCS / "trainer.md").read_text(), (DOCS / "datasets.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)` \| ([-0-9.]+) \|", trainer_md, re.M))
    assert {k: float(table[k]) for k in numbers} == {k: getattr(rule, k) for k in numbers}
    (row,) = re.findall(r"at least 3 and 1; ([^)]*)\)", datasets_md)
    assert [float(v) for v in row.split(", ")] == [getattr(rule, k) for k in numbers]
    # Patience and smoothing scale with the ceiling: 10 % and 5 % of it, at least 3 and 1, wherever that is said.
    schema = json.loads(SPECS_SCHEMA.read_text())
    said = schema["properties"]["training"]["properties"]["early_stopping"]["description"]
    auto = re.compile(r"(\d+) % and (?:smoothing )?(\d+) % of (?:it|the ceiling), at least (\d+) and (\d+)")
    for text in (said, datasets_md):
        assert [int(v) for v in auto.search(text).groups()] == [
            config.auto_patience(1000) // 10, config.auto_smoothing(1000) // 10, config.auto_patience(1),
            config.auto_smoothing(1)]


def test_a_plateau_lowers_the_learning_rate_before_it_stops_the_run():
    rule = Rule(patience=2, min_delta=0.0, reductions=2, factor=0.5, smoothing=1)  # reductions are opt-in (default 0)
    # Plateaus after epochs 3 and 6 lower the rate (0.5, then 0.25 of it); the third, after epoch 10, stops.
    state = replay(rule, [1.0, 1.0, 1.0, 0.9, 0.9, 0.9, 0.8, 0.7, 0.7, 0.7, 0.1])
    assert (state.reduced_at, state.reduced, state.stopped, state.epochs, state.best_epoch) == ([3, 6], 2, True, 10, 8)
    assert state.learning_rate(rule, 0.02) == pytest.approx(0.005)
    # None: the first plateau stops.
    assert replay(Rule(patience=2, reductions=0, smoothing=1), [1.0, 1.0, 1.0]).epochs == 3


def test_start_from_epoch_and_patience_zero_and_no_held_out_loss():
    late = replay(Rule(patience=1, start_from_epoch=3, reductions=0, smoothing=1), [1.0, 2.0, 3.0, 3.0, 3.5])
    assert (late.epochs, late.best_epoch) == (5, 4)
    off = replay(Rule(patience=0, smoothing=1), [1.0, 2.0, 3.0, 4.0])
    assert (off.stopped, off.epochs, off.best_epoch) == (False, 4, 1)  # off: to the ceiling, the best still kept
    nothing = replay(Rule(patience=1, smoothing=1), [None, None, None])
    assert (nothing.stopped, nothing.best_epoch) == (False, None)
    with pytest.raises(ValueError, match="early stopping"):
        Rule(patience=-1)
    with pytest.raises(ValueError, match="early stopping"):
        Rule(min_delta=1.0)
    with pytest.raises(ValueError, match="early stopping"):
        Rule(factor=1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(0.0, 10.0)), min_size=1, max_size=30),
       st.integers(0, 30), st.integers(1, 5), st.floats(0.0, 0.5), st.integers(0, 3), st.integers(1, 6),
       st.floats(0.0, 0.5))
def test_the_state_resumed_from_any_epoch_decides_as_the_uninterrupted_one(values, cut, patience, min_delta,
                                                                           reductions, smoothing, min_gain):
    """A restart hands the rule its state after ``cut`` epochs through JSON: it must end exactly where the
    uninterrupted replay does."""
    rule = Rule(patience=patience, min_delta=min_delta, reductions=reductions, smoothing=smoothing,
                min_gain=min_gain)
    whole = replay(rule, values)
    state = State()
    for i, v in enumerate(values):
        if i == cut:
            state = State.from_json(state.to_json())
        if state.update(rule, v):
            break
    assert state == whole
    assert all(whole.best is None or v is None or v >= whole.best for v in whole.values)


def test_files_written_and_kept_for_the_restore_point(tmp_path):
    rule = Rule(patience=5, smoothing=1)
    state = State()
    weights = {}
    for epoch, value in enumerate([3.0, 2.0, 2.5, 1.0, 1.5], start=1):
        before = State.from_json(state.to_json())
        state.update(rule, value)
        w = [np.full((2, 2), epoch, np.float32)]
        weights[epoch] = w
        stopping.write(tmp_path, state, w if state.best_epoch == epoch else None, before)
        # The state of this epoch and of the one before (still the restore point until the next mirror).
        names = sorted(p.name for p in tmp_path.iterdir())
        assert f"landfall-stopping-{epoch}.json" in names
        assert stopping.read_state(tmp_path, epoch) == state
        if epoch > 1:
            assert stopping.read_state(tmp_path, epoch - 1) is not None
        assert not any(n.startswith(f"landfall-stopping-{epoch - 2}.") for n in names) or epoch < 3
        assert not [n for n in names if n.startswith(".")]  # nothing half-written left behind
    # After epoch 5: best is epoch 4, and the state of epoch 4 named best 4 too; best 2 is gone.
    assert sorted(p.name for p in tmp_path.glob("landfall-best-*")) == ["landfall-best-4.npz"]
    np.testing.assert_array_equal(stopping.read_best(tmp_path, 4)[0], weights[4][0])
    assert stopping.latest_state(tmp_path).epochs == 5
    assert stopping.read_state(tmp_path, 0) == State()
    assert stopping.read_state(tmp_path, 2) is None


def test_the_ceilings_cost_prices_the_epochs_not_run_at_the_median_epoch():
    doc = {"stopped_early": True, "epochs_ceiling": 10, "started_at": "2026-01-01T00:00:00Z",
           "ended_at": "2026-01-01T00:01:40Z", "epochs": [{"wall_s": w} for w in (10.0, 8.0, 9.0, 30.0)]}
    # 100 s wall on 2 GPUs: 200 GPU-s; 6 more epochs at the median epoch (10 s, the upper median) x 2 GPUs.
    assert ceiling_cost(doc, 200.0) == {"ceiling_gpu_seconds": 320.0, "saved_gpu_seconds": 120.0}
    assert ceiling_cost({**doc, "stopped_early": False}, 200.0) == {"ceiling_gpu_seconds": 200.0,
                                                                     "saved_gpu_seconds": 0.0}


# -- the callback in Keras: the best weights kept, a restart resuming exactly ------------------------------


def _model_and_data():
    import tf_keras as keras

    from trainer.training.model import build_model

    keras.utils.set_random_seed(7)
    model = build_model(8, 3, (8, 4), 0.0, 3e-2)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8, 3)).astype(np.float32)
    v = rng.normal(size=(64, 8, 3)).astype(np.float32)  # noise: the held-out loss soon stops improving
    return model, x, v


class Recorder:
    def __new__(cls):
        import tf_keras as keras

        class _Recorder(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.weights, self.val = [], []

            def on_epoch_end(self, epoch, logs=None):
                self.weights.append(self.model.get_weights())
                self.val.append(float(logs["val_loss"]))

        return _Recorder()


class Crash(Exception):
    pass


def _fit(folder, epochs: int, rule: Rule, crash_after: int | None = None):
    import tf_keras as keras

    from trainer.train import ConvergenceStop

    model, x, v = _model_and_data()
    rec = Recorder()
    converge = ConvergenceStop(rule, folder, monitored=True, worker=0, learning_rate=3e-2)

    class Killer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if crash_after is not None and epoch + 1 == crash_after:
                raise Crash  # as a preempted worker: after the backup of this epoch was written

    callbacks = [keras.callbacks.BackupAndRestore(str(folder), save_freq="epoch", delete_checkpoint=False),
                 converge, rec, Killer()]
    try:
        model.fit(x, x, validation_data=(v, v), epochs=epochs, batch_size=64, shuffle=False, verbose=0,
                  callbacks=callbacks)
    except stopping.Converged:
        converge.keep_best()
    return model, rec, converge


def test_the_best_epochs_weights_are_kept_and_a_crashed_run_resumes_to_the_same_end(tmp_path):
    rule = Rule(patience=2, min_delta=0.0, reductions=1, factor=0.5, smoothing=1)
    model, rec, converge = _fit(tmp_path / "whole", 40, rule)
    state = converge.state
    assert state.stopped and state.epochs < 40, rec.val  # stopped before the ceiling
    assert state.values == pytest.approx(rec.val)
    assert replay(rule, rec.val) == state  # the rule, replayed on what Keras logged
    assert state.best_epoch < state.epochs  # so the last weights are not the best ones ...
    for got, want in zip(model.get_weights(), rec.weights[state.best_epoch - 1], strict=True):
        np.testing.assert_array_equal(got, want)  # ... and the model holds the best epoch's
    summary = converge.summary(40)
    assert summary["epochs_run"] == state.epochs and summary["stopped_early"] and summary["best_epoch"] == \
        state.best_epoch

    assert state.reduced == 1 and float(model.optimizer.learning_rate.numpy()) == pytest.approx(1.5e-2)
    # Crashed after the first epoch, around the best and the learning-rate reduction, and after the stop itself:
    # each resumed run ends the same (the same reduced rate in force after the restart).
    for crash_after in sorted({1, max(1, state.best_epoch - 1), state.best_epoch, *state.reduced_at, state.epochs}):
        folder = tmp_path / f"crash-{crash_after}"
        with pytest.raises(Crash):
            _fit(folder, 40, rule, crash_after=crash_after)
        resumed, _, again = _fit(folder, 40, rule)
        assert again.state == state, crash_after
        assert float(resumed.optimizer.learning_rate.numpy()) == pytest.approx(1.5e-2)
        for got, want in zip(resumed.get_weights(), model.get_weights(), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- the trainer: epochs a ceiling, what it records --------------------------------------------------------


def test_the_trainer_stops_at_convergence_and_records_it(tmp_path):
    storage = Storage()
    manifest = write_dataset(storage, str(tmp_path / "tfrecords" / "demo" / "a1"), make_array(1024, seed=5))
    job_dir = tmp_path / "runs" / "conv"
    proc = run_trainer(["--manifest", manifest, "--job-dir", str(job_dir), "--epochs", "40",
                        "--batch-size-per-worker", "64", "--units", "8,4", "--learning-rate", "0.02",
                        "--early-stopping-patience", "2", "--early-stopping-min-delta", "0.05",
                        "--early-stopping-reductions", "0", "--early-stopping-smoothing", "1",
                        "--verbose", "0", "--min-skill", "-1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((job_dir / "metrics.json").read_text())
    assert m["status"] == "succeeded" and m["stopped_early"] is True
    assert m["strategy"] == "default" and m["replicas"] == 1  # one worker: no multi-worker strategy (#50)
    assert m["epochs_run"] == len(m["epochs"]) < m["epochs_ceiling"] == m["epochs_requested"] == 40
    vals = [e["val_loss"] for e in m["epochs"]]
    assert m["best_epoch"] == int(np.argmin(vals)) + 1 and m["best_val_loss"] == pytest.approx(min(vals))
    assert m["early_stopping"]["patience"] == 2 and m["early_stopping"]["monitored"] is True
    assert m["early_stopping"]["smoothing"] == 1 and m["early_stopping"]["monitor"] == "val_loss"
    assert m["ceiling_gpu_seconds"] == m["gpu_seconds"] == 0.0  # no GPU here: nothing spent, nothing saved
    assert not (job_dir / "backup").exists()  # finished: the backup (and the stopping state in it) is gone
    # Run again into the same job dir: a finished converged run is not trained again.
    again = run_trainer(["--manifest", manifest, "--job-dir", str(job_dir), "--epochs", "40",
                         "--batch-size-per-worker", "64", "--units", "8,4", "--verbose", "0"])
    assert again.returncode == 0 and "already holds a finished run" in again.stderr
