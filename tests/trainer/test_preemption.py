"""SIGTERM while training (``trainer.training.preemption``, issue #41): the epoch in progress is finished, then every
worker stops with ``Preempted`` (exit 143); an epoch that cannot end within the deadline exits 143 at once. The
two-worker runs through both engines, with a node that disappears mid-epoch, are
tests/landfall/local/test_operator.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

FIT = """
import os, signal, time
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import numpy as np
import tf_keras as keras
from trainer.training import preemption

class Sigterm(keras.callbacks.Callback):
    def __init__(self, at, pause=0.0):
        super().__init__()
        self.at, self.pause, self.batches, self.epochs = at, pause, 0, 0
    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.batches == self.at:
            os.kill(os.getpid(), signal.SIGTERM)  # the notice, mid-epoch
        time.sleep(self.pause)
    def on_epoch_end(self, epoch, logs=None):
        self.epochs += 1

def fit(at, pause=0.0, grace_s=30.0, epochs=3):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    model.compile("sgd", "mse")
    x, y = np.ones((40, 3), "float32"), np.zeros((40, 2), "float32")
    sig = Sigterm(at, pause)
    notice = preemption.PreemptionNotice(lambda row: [row], 0, None, 1, grace_s=grace_s)
    try:
        model.fit(x, y, batch_size=4, epochs=epochs, verbose=0, callbacks=[sig, notice])
    finally:
        print("EPOCHS", sig.epochs, "BATCHES", sig.batches, flush=True)
"""


def run(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "functions"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(FIT) + textwrap.dedent(code)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_sigterm_mid_epoch_finishes_the_epoch_then_stops_retryably():
    # 10 batches an epoch; the notice after batch 13 (epoch 2's 3rd): epoch 2 is finished, epoch 3 never starts.
    done = run("""
        from trainer.errors import Preempted, exit_code
        try:
            fit(at=13)
        except Preempted as exc:
            print("CODE", exit_code(exc), flush=True)
        # outside fit SIGTERM has its default again: the process ends at once
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        print("STILL HERE")
    """)
    assert "EPOCHS 2 BATCHES 20" in done.stdout, done.stdout + done.stderr
    assert "CODE 143" in done.stdout
    assert "STILL HERE" not in done.stdout and done.returncode == -signal.SIGTERM


def test_an_epoch_that_cannot_end_within_the_deadline_exits_143_at_once():
    done = run("fit(at=2, pause=0.5, grace_s=1.0)")  # 8 more batches of 0.5 s would take 4 s
    assert done.returncode == 143, done.stdout + done.stderr
    assert "EPOCHS" not in done.stdout  # gone mid-epoch, before fit returned
    assert "did not end within 1 s of SIGTERM" in done.stdout + done.stderr


def test_without_a_notice_it_is_silent():
    done = run("fit(at=10 ** 6, epochs=2)")
    assert done.returncode == 0 and "EPOCHS 2 BATCHES 20" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("rows", [[[0.0, 0.0, 0.0], [1.0, 3.0, 0.5]]])
def test_the_chief_records_a_peers_notice(rows):
    from trainer.errors import Preempted
    from trainer.training import preemption

    class Metrics:
        enabled, doc, saved = True, {}, 0

        def save(self):
            self.saved += 1

    metrics = Metrics()
    calls = []

    def gather(row):
        calls.append(row)
        return rows if len(calls) == 1 else [[0.0], [0.0]]

    notice = preemption.PreemptionNotice(gather, 0, metrics, attempt=2)
    notice.on_epoch_begin(4)
    for b in range(7):
        notice.on_train_batch_end(b)
    with pytest.raises(Preempted):
        notice.on_epoch_end(4)
    (entry,) = metrics.doc["preemptions"]
    assert {k: entry[k] for k in ("attempt", "worker", "workers", "epoch", "notice_step", "steps_per_epoch",
                                  "seconds_after_notice", "steps_lost")} == {
        "attempt": 2, "worker": 1, "workers": [1], "epoch": 5, "notice_step": 3, "steps_per_epoch": 7,
        "seconds_after_notice": 0.5, "steps_lost": 0}
    assert metrics.saved == 1 and len(calls) == 2  # saved before the barrier that lets the peers exit
    assert np.isfinite(entry["seconds_after_notice"])
