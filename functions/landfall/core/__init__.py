"""What every part of Landfall shares, in layers (docs/architecture.md): foundations, rules, contracts, services ...
May import nothing of Landfall's outside ``core``; only ``core.services`` imports Google's clients.
Imported by every other subpackage, the trainer and the benches. (The wrappers of the Kubernetes API and of Cloud
Run's Admin API live with the one stage that uses each: ``submit.backends.kube``, ``arrival.cloudrun``.)
The foundations, here: ``config`` (the settings loader and the seed's defaults), ``errors`` (the one exception root,
split by retry class), ``logs`` (JSON lines with ``severity``) and ``runtime`` (what a stage's handler works with).
Above them: ``rules`` (pure arithmetic), ``contracts`` (what the stages exchange), ``services`` (one wrapper per
external service), and ``artifacts`` and ``quality`` (what is kept in the bucket, and an arrival's data quality).
"""
