"""Benchmarks (the ``landfall_bench`` package): ratios measured side by side in one run, never timed tests."""
