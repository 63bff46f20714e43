"""``trainer.iterators``: the iterators Keras makes of a dataset are recorded and let go on the release thread, not
on the thread that drops them (TensorFlow's autotuning thread can hold an iterator's destructor for up to 60 s,
issue #42); ``numpy_blocks`` yields what ``as_numpy_iterator`` yields and lets go of it there too."""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np

from trainer import iterators


class _Dropped:
    """Records the thread its last reference was dropped on."""

    def __init__(self, seen: list[str]):
        self.seen = seen

    def __del__(self):
        self.seen.append(threading.current_thread().name)


def _wait(seen: list[str], n: int = 1, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_release_drops_the_last_reference_on_the_release_thread():
    seen: list[str] = []
    box = [_Dropped(seen), _Dropped(seen)]
    iterators.release(box)
    del box
    _wait(seen, 2)
    assert seen == ["landfall-iterator-release"] * 2
    iterators.release([])  # nothing to do


def test_a_kept_dataset_is_still_its_class_and_records_every_iterator_made_of_it():
    import tensorflow as tf

    ds = tf.data.Dataset.range(5)
    cls = type(ds)
    kept = iterators.Kept()
    same = iterators.keeping(ds, kept)
    assert same is ds and isinstance(ds, cls) and isinstance(ds, tf.data.Dataset) and type(ds).__name__ == cls.__name__
    assert [int(v) for v in ds] == list(range(5)) and [int(v) for v in ds] == list(range(5))
    assert len(kept.made) == 2
    kept.release_all()
    assert kept.made == []


def test_a_distributed_dataset_kept_still_trains_and_its_iterators_are_let_go_after_fit():
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.get_strategy()
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    ds = strategy.distribute_datasets_from_function(
        lambda ctx: tf.data.Dataset.from_tensor_slices((x, x)).batch(16).repeat())
    val = strategy.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.from_tensor_slices((x, x)).batch(16))
    made, validating = iterators.Kept(), iterators.Kept()
    ds, val = iterators.keeping(ds, made), iterators.keeping(val, validating)
    model = keras.Sequential([keras.layers.Dense(4, input_shape=(4,))])
    model.compile("sgd", "mse")
    history = model.fit(ds, epochs=3, steps_per_epoch=4, validation_data=val, validation_steps=4, verbose=0)
    assert len(history.history["val_loss"]) == 3
    assert len(made.made) == 1 and len(validating.made) >= 3  # one training iterator; validation ones every epoch
    made.release_all()
    validating.release_all()


def test_numpy_blocks_yields_what_as_numpy_iterator_yields():
    import tensorflow as tf

    ds = tf.data.Dataset.range(10).batch(3)
    got = list(iterators.numpy_blocks(ds))
    want = list(ds.as_numpy_iterator())
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
