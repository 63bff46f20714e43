"""``.csv``: rows of ``T x F`` numbers, or a series (a time column and one column per channel), by the rules of
``landfall.arrival.csvfile`` (header, BOM, quoting, repeated headers, an index column). Splits by lines
(``ranges.csv_share``; a series by ``series.csv_share``). A labelled set is a CSV with a label column
(``labelled_file.read_csv``). A format module of ``landfall.arrival.format_registry``."""

from __future__ import annotations

from landfall.arrival import csvfile, labelled_file, ranges, series
from landfall.arrival.format_registry import Format, SeriesReader

RATE = 115e6  # stored bytes/s per vCPU (landfall bench convert --rates, 2026-11-30)

FORMAT = Format(
    name="csv", suffixes=(".csv",), rate=RATE,
    instances=lambda src, size, cfg: csvfile.read_csv(src, cfg),
    ranges=ranges.csv_share,
    series=SeriesReader(chunks=series.csv_chunks, head=series.csv_head, share=series.csv_share),
    labelled=labelled_file.read_csv,
)
