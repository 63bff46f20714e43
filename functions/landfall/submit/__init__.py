"""The submit stage: a training request becomes at most one TFJob (coalescing, rendering, the backends' API side).
May import ``landfall.core`` only (never ``arrival``, ``local`` or ``cli``); deploys in the functions archive.
Imported by ``functions/main.py:on_training_request``, ``landfall.reconcile``, the local operator and the CLI.
"""
