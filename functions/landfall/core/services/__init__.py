"""One wrapper per external service: Cloud Storage, Pub/Sub, the Kubernetes API, Cloud Run's Admin API.
May import core's foundations, ``core.contracts`` and ``core.rules``; only these import Google's and k8s clients.
Imported by ``core.runtime``, ``core.artifacts``, ``core.quality``, the stages, the trainer and the benches.
``google_api`` is the one mapping of Google's errors to Landfall's retry classes.
"""
