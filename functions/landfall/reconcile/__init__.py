"""The production reconciler: starts waiting follow-up TFJobs on a cluster once their predecessor ends, announces
jobs that ended without a chief, and applies the snapshots' collection rule (``collect``).
May import ``landfall.submit``, ``landfall.arrival`` (``collect``: the compactor's ``collect``) and ``landfall.core``;
never the local stack or the CLI.
Imported by ``landfall reconcile`` (``landfall.cli.reconcile``), which the reconciler Deployment runs.
"""
