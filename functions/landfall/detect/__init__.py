"""Detections on arrival: each committed arrival of a dataset with a champion, scored by that champion.
May import ``landfall.core``, ``landfall.arrival`` (the converter's readers) and ``trainer.scoring``.
Imported by ``scorer/main.py`` (the Cloud Run service), ``landfall.local`` (``landfall up``) and ``landfall.cli``.

Scored exactly as ``landfall score`` scores a file (``score``), its results written under ``scores/`` and announced on
``landfall-detections`` (``handler``; contracts in ``landfall.core.artifacts.detections``). Runs in the scorer service,
never in
the functions: it needs TensorFlow, and the functions' archive leaves this package out.
"""
