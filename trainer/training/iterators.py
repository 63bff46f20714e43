"""Where the trainer's tf.data iterators end: on the thread that used them, or never (issues #42 and #46).

The stall (#42). Destroying a tf.data iterator that has run for a while can block its thread for up to 60 s, doing
nothing. Each iterator's root (``RootDataset::Iterator``) runs an autotuning thread (``model::Model::OptimizeLoop``)
that sleeps between optimisations for a period that doubles from 10 ms to 60 s; the iterator's destructor cancels
it and joins it. The cancellation callback wakes the sleeper *before* the cancellation manager marks itself
cancelled (``CancellationManager::StartCancelWithStatus`` runs the callbacks, then stores ``is_cancelled_``), so a
sleeper that wakes in between sees "not cancelled" and sleeps out the rest of its period. The period an iterator
has reached is about as long as it has lived, so the stall is bounded by the iterator's age and by 60 s: the
training iterator, which lives for the whole ``fit``, stalled ``fit``'s return 30-58 s (#42's thread dumps:
``~IteratorResource -> RootDataset::Iterator::~Iterator -> ~LogicalThreadWrapper``). Turning autotuning off for our
own datasets does not remove it: the per-device iterator ``tf.distribute`` builds around them
(``MultiDeviceIterator``) has TensorFlow's default options, autotuning on.

The crash (#46). #42 first moved those destructors to a daemon thread, so that the trainer went on while they
joined. That is a data race inside TensorFlow: destroying a distributed iterator drops the functions of its
per-device generators from the eager context (``EagerContext::RemoveFunction``, which erases their definitions from
the function library) while the main thread saves the model, traces its serving function and loads the SavedModel
back for the verdict, all of which look functions up in that library by name. Under load the two interleave and
the trainer dies of SIGSEGV after its last epoch (1 of 40 short runs beside a CPU burner; 3 times in one suite).
TensorFlow's eager runtime is not made to be finalised from one thread while another uses it, so no TensorFlow
object is destroyed off the thread that uses it any more.

What instead. ``park`` keeps an iterator alive until the process ends: the trainer exits with ``os._exit``
(``trainer.task``), which runs no destructor, so the training iterator (the one old enough to stall) is never
destroyed at all. ``keeping`` records the iterators Keras makes of the training dataset, so that ``fit``'s own
reference is not the last. The per-epoch validation iterators are left to Keras, which drops each at the end of its
``evaluate``: they live one validation pass, so their stall, when the race is lost, is bounded by that pass's
length. ``numpy_blocks`` (the verdict's single passes) ends its iterator on the caller's thread as soon as it is
exhausted, for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_parked: list[Any] = []  # alive until the process ends (os._exit: never destroyed)


def park(objects: list[Any]) -> None:
    """Keeps ``objects`` alive for the rest of the process (module doc); empties ``objects``."""
    _parked.extend(objects)
    objects.clear()


def parked() -> int:
    """How many objects are parked."""
    return len(_parked)


class Kept:
    """The iterators made of a dataset ``keeping`` wraps, until ``park_all`` parks them."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    def park_all(self) -> None:
        park(self.made)


def keeping(dataset: Any, kept: Kept) -> Any:
    """``dataset`` (a ``tf.data.Dataset`` or a distributed one), its class swapped for a subclass whose ``__iter__``
    also records each iterator in ``kept``: Keras iterates it and drops the iterator where it likes, and the last
    reference is then ours. Still an instance of its class, so Keras takes it as before."""
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
    """``dataset.as_numpy_iterator()``'s elements; its iterator ends on this thread once the pass is done."""
    it = dataset.as_numpy_iterator()
    try:
        yield from it
    finally:
        del it
