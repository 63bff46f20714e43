"""One wrapper per external service that several stages use: Cloud Storage and Pub/Sub.
May import core's foundations, ``core.contracts`` and ``core.rules``; only these import Google's clients.
Imported by ``core.runtime``, ``core.artifacts``, ``core.quality``, the stages, the trainer and the benches.
The wrapper of a service one stage alone uses lives in that stage: the Kubernetes API's
(``landfall.submit.backends.kube``) and Cloud Run's Admin API's (``landfall.arrival.cloudrun``).
``google_api`` is the one mapping of Google's errors to Landfall's retry classes.
"""
