"""The production reconciler: releases waiting follow-ups, announces chiefless ends, collects old snapshots.
May import ``landfall.submit``, ``landfall.arrival`` (its ``compact.collect``) and ``landfall.core``; never local/cli.
Imported by ``landfall reconcile`` (``landfall.cli.reconcile``), which the reconciler Deployment runs.

It starts a dataset's waiting follow-up job once its predecessor ends (and its retrain policy allows), announces
jobs that ended without a chief to do so, and applies the snapshots' collection rule (``collect``).
"""
