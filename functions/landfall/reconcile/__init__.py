"""The production reconciler: starts waiting follow-up TFJobs on a cluster once their predecessor ends.
May import ``landfall.submit`` and ``landfall.core``; never the local stack or the CLI.
Imported by ``landfall reconcile`` (``landfall.cli.reconcile``), which the reconciler Deployment runs.
"""
