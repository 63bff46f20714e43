"""The arithmetic every stage applies alike: hold-out, series windows, repeated times, moments, VUS-PR, GPU costs.
May import core's foundations only: pure functions, no I/O.
Imported by ``core.contracts`` and everything above it, the stages, the trainer and the benches.
"""
