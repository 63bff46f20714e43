"""What a step costs (issue #50): one worker pays no multi-worker tax, and no callback syncs with the device each
step. The runs are checked where they train: ``metrics.json``'s ``strategy`` in ``test_stopping`` (one worker) and
``test_distributed`` (two)."""

from __future__ import annotations

import tensorflow as tf

from trainer import train
from trainer.config import TrainerConfig
from trainer.training.cluster import Cluster


def test_one_worker_trains_under_the_default_strategy_several_under_multi_worker_mirrored():
    assert train.strategy_kind(1, 0) == train.strategy_kind(1, 1) == train.DEFAULT
    assert train.strategy_kind(1, 4) == train.MIRRORED  # one worker's several GPUs: no cross-host collective
    assert train.strategy_kind(2, 0) == train.strategy_kind(3, 8) == train.MULTI_WORKER
    # Several workers: decided without touching TensorFlow's context (MultiWorkerMirroredStrategy sets it up first).
    assert train.chosen_strategy(Cluster(num_workers=2, worker_index=1, configured=True)) == train.MULTI_WORKER


def test_a_one_worker_cluster_gets_tensorflows_default_strategy_and_no_collective():
    one = Cluster(num_workers=1, configured=True)  # TF_CONFIG with one worker, as the operator sets it
    kind = train.chosen_strategy(one)
    assert kind == train.DEFAULT  # no GPU on this machine
    strategy = train.make_strategy(TrainerConfig(), kind)
    assert strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy()
    assert strategy.num_replicas_in_sync == 1
    # The per-epoch gather of every worker's figures is the worker's own row: no all-reduce to wait on.
    assert train.per_worker(strategy, 1, [3, 1.5]) == [[3.0, 1.5]]


def test_fits_callbacks_cost_no_host_sync_per_step(tmp_path):
    """Keras turns every step's logs into numbers (a sync with the device each step) unless every callback with a
    per-step hook says it takes them as tensors: the list ``trainer.train.fit`` builds, in its order."""
    import tf_keras as keras

    from trainer.config import Rule
    from trainer.training import preemption

    marks = train.FitMarks()
    timer = train.EpochTimer()
    callbacks = [
        marks, timer,
        keras.callbacks.BackupAndRestore(str(tmp_path / "backup"), save_freq="epoch", delete_checkpoint=True),
        train.ConvergenceStop(Rule.auto(10), tmp_path, monitored=True, worker=0, learning_rate=1e-3),
        keras.callbacks.TensorBoard(str(tmp_path / "tb"), write_graph=False, profile_batch=0),
        train.EpochReporter(Cluster(), None, None, None, tmp_path, 1, timer, tf.distribute.get_strategy()),
        preemption.PreemptionNotice(lambda row: [row], 0, None, 1),
        marks.last,
    ]
    listed = keras.callbacks.CallbackList(callbacks)
    assert listed._batch_hooks_support_tf_logs  # no per-step conversion of the logs
    assert not train.EpochReporter._implements_train_batch_hooks(callbacks[5])  # steps from Keras's params instead


def test_several_steps_per_execution_still_record_every_step(tmp_path):
    """``--steps-per-execution 3`` (Keras runs three steps per call, one per-step hook call per three steps): the
    epochs still count every step's examples, and the run ends as one step per call would."""
    import json

    from landfall.core.services.storage import Storage
    from tests.trainer.helpers import make_array, run_trainer, write_dataset

    manifest = write_dataset(Storage(), str(tmp_path / "tfrecords" / "demo" / "a1"), make_array(320, seed=2))
    job_dir = tmp_path / "runs" / "spe"
    proc = run_trainer(["--manifest", manifest, "--job-dir", str(job_dir), "--epochs", "2", "--steps-per-execution",
                        "3", "--batch-size-per-worker", "32", "--min-steps-per-epoch", "0", "--units", "8,4",
                        "--validation-fraction", "0", "--verbose", "0", "--min-skill", "-1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((job_dir / "metrics.json").read_text())
    assert m["status"] == "succeeded" and m["steps_per_epoch"] == 320 // 32 == 10  # not a multiple of 3
    assert [e["examples"] for e in m["epochs"]] == [10 * 32, 10 * 32]
