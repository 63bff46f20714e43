"""Side-by-side timing for the benchmarks: contenders measured in alternating rounds, so they share the machine's
noise, and their medians reported (never a timed test: docs/benchmarks.md)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeat: int) -> float:
    return interleaved({"x": fn}, repeat)["x"]


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each function, run in alternating rounds so they share the machine's noise."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def alternating(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """As ``interleaved``, the order reversed every other round (no contender always goes first), with each one's
    median CPU seconds too (``<key>`` with ``_s`` replaced by ``_cpu_s``: this process's threads, all of them),
    which other work on a shared machine disturbs far less than the wall clock."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(repeat):
        for key, fn in (list(fns.items()) if i % 2 == 0 else list(fns.items())[::-1]):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[key].append(time.perf_counter() - start)
            cpu[key].append(time.process_time() - start_cpu)
    return {**{k: statistics.median(v) for k, v in times.items()},
            **{k.removesuffix("_s") + "_cpu_s": statistics.median(v) for k, v in cpu.items()}}


def pipeline_rates(datasets: dict, batches: int, warmup: int, rounds: int, batch_size: int) -> dict[str, float]:
    """Examples/s of each ``tf.data`` pipeline in ``datasets`` (``batches`` batches of ``batch_size``), median of
    ``rounds``; rounds alternate between the pipelines, so a busy machine slows them alike. Every measurement uses a
    fresh iterator that is never left idle (an idle pipeline keeps prefetching, which would inflate its next
    reading), warmed up by ``warmup`` untimed batches."""
    samples: dict[str, list[float]] = {name: [] for name in datasets}
    for _ in range(rounds):
        for name, ds in datasets.items():
            it = iter(ds)
            for _ in range(warmup):
                next(it)
            start = time.perf_counter()
            for _ in range(batches):
                next(it)
            samples[name].append(batches * batch_size / (time.perf_counter() - start))
            del it
    return {name: round(statistics.median(v), 1) for name, v in samples.items()}
