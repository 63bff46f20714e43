"""One wrapper per external service: Cloud Storage, Pub/Sub, the Kubernetes API, Cloud Run's Admin API,
with ``google_api`` the one mapping of Google's errors to Landfall's retry classes.
May import ``core``'s foundations and ``core.contracts``; the only modules that import Google's and
Kubernetes' clients.
Imported by ``core.runtime``, ``core.artifacts``, ``core.quality``, the stages, the trainer and the benches.
"""
