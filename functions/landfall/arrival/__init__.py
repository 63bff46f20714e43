"""The arrival stage: an object under ``incoming/`` becomes TFRecord shards, a manifest and a training request.
May import ``landfall.core`` only (never ``submit``, ``local`` or ``cli``); deploys in the functions archive.
Imported by ``functions/main.py:on_data_arrival``, ``landfall convert``, the local stack and the benches.
"""
