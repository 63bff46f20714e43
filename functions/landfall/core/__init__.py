"""Contracts (messages, records, layout, config, errors, events) and one wrapper per service (storage, pubsub, kube).
May import nothing of Landfall's outside ``core``; only its wrappers import Google's and Kubernetes' clients.
Imported by every other subpackage, the trainer and the benches.
"""
