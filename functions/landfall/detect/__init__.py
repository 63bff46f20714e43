"""Detections on arrival: each committed arrival of a dataset with a champion, scored by that champion.
May import ``landfall.core`` (``landfall.core.scoring`` serves the champion) and ``landfall.arrival`` (the converter's
readers); never the trainer, which the scorer's image does not ship.
Imported by ``scorer/main.py`` (the Cloud Run service), ``landfall.local`` (``landfall up``) and ``landfall.cli``.

Scored exactly as ``landfall score`` scores a file (``score``), its results written under ``scores/`` and announced on
``landfall-detections`` (``handler``; contracts in ``landfall.core.artifacts.detections``). Runs in the scorer service,
never in
the functions: it needs TensorFlow, and the functions' archive leaves this package out.
"""
