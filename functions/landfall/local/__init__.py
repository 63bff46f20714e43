"""The laptop stack: emulators, ``landfall up``, the local TFJob operator, the demo, scaling runs, plots, data.
May import ``reconcile``, ``submit``, ``arrival`` and ``core``; never deployed (excluded from the functions archive).
Imported by the CLI, the tests and the benches only.
"""
