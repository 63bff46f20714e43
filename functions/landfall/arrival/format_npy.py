"""``.npy``: one array ``(N, T, F)`` of a float dtype in C order (``formats.read_npy``; never unpickled). Splits into
ranges of instances (``ranges.npy_share``). No series (no time column) and no labelled set (one array: no room for
labels). A format module of ``landfall.arrival.format_registry``, the smallest."""

from __future__ import annotations

from landfall.arrival import formats, ranges
from landfall.arrival.format_registry import Format

RATE = 216e6  # stored bytes/s per vCPU (landfall bench convert --rates, 2026-11-30: 216 MB/s)

FORMAT = Format(
    name="npy", suffixes=(".npy",), rate=RATE,
    instances=lambda src, size, cfg: (formats.read_npy(src, size, cfg), None),
    ranges=ranges.npy_share,
    no_labels="an .npy holds one array, with no room for labels: write an .npz with the instances and a {label} "
              "array (numpy.savez)",
)
