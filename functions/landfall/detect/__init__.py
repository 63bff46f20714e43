"""Detections on arrival: each committed arrival of a dataset with a champion, scored by that champion.
May import ``landfall.core`` (its ``scoring`` serves the champion) and ``landfall.arrival`` (readers), not the trainer.
Imported by ``scorer/main.py`` (the Cloud Run service), ``landfall.local`` (``landfall up``) and ``landfall.cli``.
The scorer's image ships neither the trainer nor ``bench/`` (issue #66).

Scored exactly as ``landfall score`` scores a file (``score``), its results written under ``scores/`` and announced on
``landfall-detections`` (``handler``; contracts in ``landfall.core.artifacts.detections``). Runs in the scorer service,
never in
the functions: it needs TensorFlow, and the functions' archive leaves this package out.
"""
