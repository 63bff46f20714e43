"""``trainer.training.iterators`` (#42, #46): the iterators Keras makes of the training dataset are recorded and parked
(kept alive until the process exits, so the one old enough to stall its destructor for up to 60 s is never destroyed);
no TensorFlow object is ever destroyed on another thread (that raced with the main thread's saving and crashed the
trainer); ``numpy_blocks`` yields what ``as_numpy_iterator`` yields and ends its iterator on the caller's thread."""

from __future__ import annotations

import os
import threading
import weakref

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np

from trainer.training import iterators


def test_a_kept_dataset_is_still_its_class_and_records_every_iterator_made_of_it():
    import tensorflow as tf

    ds = tf.data.Dataset.range(5)
    cls = type(ds)
    kept = iterators.Kept()
    same = iterators.keeping(ds, kept)
    assert same is ds and isinstance(ds, cls) and isinstance(ds, tf.data.Dataset) and type(ds).__name__ == cls.__name__
    assert [int(v) for v in ds] == list(range(5)) and [int(v) for v in ds] == list(range(5))
    assert len(kept.made) == 2
    before = iterators.parked()
    kept.park_all()
    assert kept.made == [] and iterators.parked() == before + 2


def test_a_distributed_dataset_kept_still_trains_and_its_iterators_are_let_go_after_fit():
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.get_strategy()
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    ds = strategy.distribute_datasets_from_function(
        lambda ctx: tf.data.Dataset.from_tensor_slices((x, x)).batch(16).repeat())
    val = strategy.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.from_tensor_slices((x, x)).batch(16))
    made = iterators.Kept()
    ds = iterators.keeping(ds, made)
    model = keras.Sequential([keras.layers.Dense(4, input_shape=(4,))])
    model.compile("sgd", "mse")
    history = model.fit(ds, epochs=3, steps_per_epoch=4, validation_data=val, validation_steps=4, verbose=0)
    assert len(history.history["val_loss"]) == 3
    assert len(made.made) == 1  # one training iterator, whatever the epochs
    kept = weakref.ref(made.made[0])
    made.park_all()
    assert kept() is not None  # parked: alive, though fit and the Kept are done with it


def test_numpy_blocks_yields_what_as_numpy_iterator_yields():
    import tensorflow as tf

    ds = tf.data.Dataset.range(10).batch(3)
    got = list(iterators.numpy_blocks(ds))
    want = list(ds.as_numpy_iterator())
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


def test_no_thread_is_started_to_end_iterators_and_numpy_blocks_ends_its_own_on_this_thread():
    import tensorflow as tf

    threads = {t.name for t in threading.enumerate()}
    ds = tf.data.Dataset.range(100).batch(10).prefetch(tf.data.AUTOTUNE)
    blocks = iterators.numpy_blocks(ds)
    assert next(blocks).tolist() == list(range(10))
    frame_locals = blocks.gi_frame.f_locals
    it = weakref.ref(frame_locals["it"])
    del frame_locals
    assert len(list(blocks)) == 9
    assert it() is None  # exhausted: ended by the generator's own frame, on this thread, at once
    assert {t.name for t in threading.enumerate()} == threads  # no release thread (the #46 race)
