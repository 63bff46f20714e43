"""An arrival's data quality: its profile, the checks against its dataset's reference, the quarantine.
May import core's foundations, ``core.contracts``, ``core.rules`` and ``core.services``.
Imported by the arrival stage, the views and the local stack.
"""
