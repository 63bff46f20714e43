"""``.csv.gz``: a gzipped CSV, read as ``.csv`` is through the gzip stream (``formats.gunzipped``, its expansion
bounded). Not splittable (a gzip stream is read from its start): one task converts it whole, a series too
(``series.whole_share``). A format module of ``landfall.arrival.format_registry``."""

from __future__ import annotations

from landfall.arrival import formats, labelled_file, series
from landfall.arrival.format_registry import Format, SeriesReader

NAME = "csv.gz"
RATE = 33e6  # stored bytes/s per vCPU (landfall bench convert --rates, 2026-11-30: level 6, ratio 2.3)

FORMAT = Format(
    name=NAME, suffixes=(".csv.gz",), rate=RATE,
    instances=lambda src, size, cfg: formats.read_csv_gz(src, cfg),
    series=SeriesReader(
        chunks=lambda src, cfg, extra=(): formats.guard_gzip(series.csv_chunks(formats.gunzipped(src, cfg), cfg,
                                                                               extra)),
        head=lambda src, cfg: series.csv_head(formats.gunzipped(src, cfg), cfg),
        share=lambda fh, size, cfg, index, count: series.whole_share(lambda: series.chunks(NAME, fh, size, cfg),
                                                                     index),
    ),
    labelled=lambda fh, size, cfg, label: labelled_file.read_csv(fh, size, cfg, label, fmt=NAME, gz=True),
)
