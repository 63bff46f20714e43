"""``.npz``: a zip of ``.npy`` arrays, one of instances unless ``npz_array`` names one (``formats.read_npz``, its
expansion bounded). Not splittable (a zip member is read from its start): one task converts it whole. A labelled set
arrives as the instances and a label array (``labelled_file.read_npz``). A format module of
``landfall.arrival.format_registry``."""

from __future__ import annotations

from landfall.arrival import format_npy, formats, labelled_file
from landfall.arrival.format_registry import Format

RATIO = 4  # a compressible array's stored bytes expand this much: its rate is .npy's over it (measured 112 MB/s for
# noisy floats that barely compress; 54 MB/s used)

FORMAT = Format(
    name="npz", suffixes=(".npz",), rate=format_npy.RATE / RATIO,
    instances=lambda src, size, cfg: (formats.read_npz(src, size, cfg), None),
    labelled=labelled_file.read_npz,
)
