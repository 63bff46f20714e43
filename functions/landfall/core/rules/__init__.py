"""The arithmetic every stage applies the same way: the hold-out split, series windows and repeated times,
merged statistics, VUS-PR, the accelerators and the cost of their hours.
May import ``core``'s foundations only: pure functions, no I/O.
Imported by ``core.contracts``, ``core.artifacts``, the stages, the trainer and the benches.
"""
