"""``landfall bench NAME [flags]``: convert, train, submit, memory, series, detect, detect-options, pca-gap,
trainer-stress, published, serving."""

from __future__ import annotations

import importlib
import sys

BENCHES = {"convert": "landfall_bench.convert", "train": "landfall_bench.train", "submit": "landfall_bench.submit",
           "memory": "landfall_bench.stack_memory", "series": "landfall_bench.series",
           "detect": "landfall_bench.protocol", "detect-options": "landfall_bench.detect",
           "pca-gap": "landfall_bench.pca_gap", "trainer-stress": "landfall_bench.stress",
           "published": "landfall_bench.published", "serving": "landfall_bench.serving"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in BENCHES:
        print(f"usage: landfall bench {{{','.join(BENCHES)}}} [flags]", file=sys.stderr)
        return 2
    return int(importlib.import_module(BENCHES[argv[0]]).main(argv[1:]) or 0)
