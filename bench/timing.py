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
