"""Detections on arrival: every committed arrival of a dataset with a champion, scored by that champion exactly as
``landfall score`` scores a file (``score``), its results written under ``scores/`` and announced on
``landfall-detections`` (``handler``; contracts in ``landfall.core.detections``). Runs in the scorer service
(``scorer/main.py``, Cloud Run), never in the functions: it needs TensorFlow."""
