"""Letting go of tf.data iterators off the critical path (issue #42).

Why. Destroying a tf.data iterator that has run for a while can block its thread for up to 60 s, doing nothing.
Each iterator's root (``RootDataset::Iterator``) runs an autotuning thread (``model::Model::OptimizeLoop``) that
sleeps between optimisations for a period that doubles from 10 ms to 60 s; the iterator's destructor cancels it and
joins it. The cancellation callback wakes the sleeper *before* the cancellation manager marks itself cancelled
(``CancellationManager::StartCancelWithStatus`` runs the callbacks, then stores ``is_cancelled_``), so a sleeper that
wakes in between sees "not cancelled" and sleeps out the rest of its period: up to 60 s once the iterator has lived
about 80 s. The race is lost more often on a busy machine (the pipeline's own threads are still producing then).

Measured (``landfall bench train --arrivals``, 2026-12-03, TensorFlow 2.21): 43 s and 58 s between the last
callback's ``on_train_end`` and ``fit`` returning in 2 of 4 runs at 100,000 instances, 30 s and 32 s in 2 of 3 runs
at 30,000. Thread dumps of a stalled trainer (gdb, ``thread apply all bt``) show the main thread in
``~IteratorResource -> RootDataset::Iterator::~Iterator -> ~LogicalThreadWrapper`` (the join) and the thread it
waits for in ``Model::OptimizeLoop``'s timed wait; its Python stack is ``fit``'s return (Keras dropping the
training iterator). Turning autotuning off for our own datasets does not remove it (1 of 3 runs still stalled 44 s):
the per-device iterator ``tf.distribute`` builds around them (``MultiDeviceIterator``) has TensorFlow's default
options, autotuning on. Nothing in the pipeline is waiting for data: it is a timer.

What. The iterators that live long are handed to one daemon thread (``release``) that drops the last reference,
so the destructor and its join run there while the trainer goes on; the process ends with ``os._exit`` whether or
not they are gone. Python releases the GIL for the join (TensorFlow's ``EagerTensor_dealloc``), so the trainer's
own thread keeps running. ``keeping`` makes a distributed dataset record the iterators Keras makes of it (the
training iterator, one per ``fit``; one validation iterator per epoch), for ``release`` once Keras is done with them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

_queue: queue.SimpleQueue = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _drop() -> None:
    while True:
        box = _queue.get()
        box.clear()  # the last reference: the iterators' destructors run here
        del box


def release(box: list) -> None:
    """Drops the objects in ``box`` on the release thread; the caller must hold no other reference to them (pass
    a list it fills and lets go of: ``release([iterator])`` after ``del iterator`` would race with the caller)."""
    global _thread
    if not box:
        return
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_drop, name="landfall-iterator-release", daemon=True)
            _thread.start()
    _queue.put(box)


class Kept:
    """The iterators made of a dataset ``keeping`` wraps, until ``release_all`` lets go of them."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    def release_all(self) -> None:
        box, self.made = self.made, []
        release(box)


def keeping(dataset: Any, kept: Kept) -> Any:
    """``dataset`` (a ``tf.data.Dataset`` or a distributed one), its class swapped for a subclass whose ``__iter__``
    also records each iterator in ``kept``: Keras iterates it and drops the iterator where it likes, and the last
    reference is then ours, dropped by ``release``. Still an instance of its class, so Keras takes it as before."""
    base = type(dataset)

    class Keeping(base):  # type: ignore[misc, valid-type]
        def __iter__(self) -> Iterator[Any]:
            made = base.__iter__(self)
            kept.made.append(made)
            return made

    Keeping.__name__ = Keeping.__qualname__ = base.__name__
    dataset.__class__ = Keeping
    return dataset


def numpy_blocks(dataset: Any) -> Iterator[Any]:
    """``dataset.as_numpy_iterator()``'s elements; its iterator, once done with, is let go on the release thread."""
    box = [dataset.as_numpy_iterator()]
    try:
        yield from box[0]
    finally:
        release(box)
