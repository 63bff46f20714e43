"""An arrival's data quality: its profile, the checks against its dataset's reference, the structure
checks, and the quarantine with its admission.
May import ``core``'s foundations, ``core.contracts`` and ``core.services``.
Imported by the arrival stage, the views and the local stack.
"""
