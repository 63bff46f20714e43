"""``shape.window.length: auto``: a series dataset's window, one period of its first arrival, written into its spec.

A user rarely knows the period of a sensor's series; TSB-AD sets every detector's window to one period, estimated from
the autocorrelation (``landfall.arrival.period``: its ``find_length_rank``, rank 1). With ``length: auto``:

1. The first arrival (the arrival stage, before it converts or routes the file) reads the first
   ``period.MAX_ROWS`` rows of the file's first channel with the series readers and estimates the period.
2. It applies the spec's next generation with ``window.length`` set to it and ``window.estimated_from`` naming the
   arrival (``gs://bucket/incoming/...#generation``), conditional on the generation it read
   (``landfall.core.artifacts.specs.apply``): of two first arrivals racing, one write lands; the other reads the spec
   again
   and uses the length it now holds, so every arrival of the dataset is cut with the same window.
3. The arrival is then converted under that generation (its manifest records it), and every later arrival, job and
   score reads a spec with a number in it: ``landfall datasets show`` shows what was chosen, and a user who wants
   another window applies it as any spec change.

A file whose rows cannot be read is refused as its conversion would refuse it (the readers' ``BadInput``). A spec
that says ``auto`` while a converter sees it (a conversion task started before the estimate landed) is temporary:
the platform retries, and the next attempt reads the number.
"""

from __future__ import annotations

import copy
import dataclasses
import logging

import numpy as np

from landfall.arrival import formats, period, series
from landfall.arrival.config import ConverterConfig, with_spec
from landfall.core.artifacts import specs
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.errors import AlreadyExists, TemporaryError
from landfall.core.services.storage import Storage

log = logging.getLogger("landfall.arrival")


def estimate(cfg: ConverterConfig, storage: Storage, source_uri: str, generation: int | None, size: int) -> int:
    """One period of the file's first channel, over its first ``period.MAX_ROWS`` rows (file order)."""
    fmt = formats.format_of(source_uri)
    reading = dataclasses.replace(cfg, timesteps=2, window_auto=False)  # the readers need no window
    parts: list[np.ndarray] = []
    held = 0
    with storage.open_read(source_uri, generation) as fh:
        for times, values in series.chunks(fmt, fh, size, reading):
            order = np.argsort(times, kind="stable")
            parts.append(values[order, 0])
            held += len(times)
            if held >= period.MAX_ROWS:
                break
    return period.length(np.concatenate(parts) if parts else np.empty(0))


def resolve(cfg: ConverterConfig, storage: Storage, arrival: layout.Arrival, size: int,
            lay: Layout | None = None) -> ConverterConfig:
    """``cfg`` with the dataset's window estimated and written into its spec (module doc); ``cfg`` unchanged when the
    spec's window is a number."""
    if not cfg.window_auto:
        return cfg
    lay = lay or Layout()
    spec = specs.for_dataset(storage, arrival.bucket, arrival.dataset, lay)
    if (spec.shape.get("window") or {}).get("length") != specs.AUTO:  # estimated since ``cfg`` was read
        return with_spec(dataclasses.replace(cfg, window_auto=False), storage, arrival.bucket, arrival.dataset, lay)
    source = layout.gs(arrival.bucket, arrival.name)
    length = estimate(cfg, storage, source, arrival.generation, size)
    doc = copy.deepcopy(spec.document())
    doc["shape"]["window"].update(length=int(length), estimated_from=f"{source}#{arrival.generation}")
    try:
        generation, _ = specs.apply(storage, arrival.bucket, doc, lay, if_generation=spec.generation)
        log.info(f"window.length auto: {length} rows (one period of {source}), spec generation {generation}",
                 extra={"dataset": arrival.dataset, "fields": {"window_length": length, "spec_generation": generation}})
    except AlreadyExists:  # another first arrival's estimate landed first: use that one
        pass
    out = with_spec(dataclasses.replace(cfg, window_auto=False), storage, arrival.bucket, arrival.dataset, lay)
    if out.window_auto:
        raise TemporaryError(f"dataset {arrival.dataset}'s window is still auto after its estimate was written")
    return out
