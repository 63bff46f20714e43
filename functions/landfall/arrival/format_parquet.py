"""``.parquet`` (or ``.pq``): ``T x F`` float columns or one list column, or a series (a time column and one column
per channel), read in row groups within a memory budget (``formats.read_parquet``). Splits by row groups
(``ranges.parquet_share``; a series by ``series.parquet_share``). A labelled set has a label column
(``labelled_file.read_parquet``). A format module of ``landfall.arrival.format_registry``."""

from __future__ import annotations

from landfall.arrival import formats, labelled_file, ranges, series
from landfall.arrival.format_registry import Format, SeriesReader

RATE = 140e6  # stored bytes/s per vCPU: 189 MB/s measured (snappy, 360 float columns); codecs and layouts vary

FORMAT = Format(
    name="parquet", suffixes=(".parquet", ".pq"), rate=RATE,
    instances=lambda src, size, cfg: (formats.read_parquet(src, size, cfg), None),
    ranges=ranges.parquet_share,
    series=SeriesReader(
        chunks=series.parquet_chunks, head=series.parquet_head,
        share=lambda fh, size, cfg, index, count: series.parquet_share(formats.guarded(fh), cfg, index, count),
    ),
    labelled=labelled_file.read_parquet,
)
