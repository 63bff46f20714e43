"""What the stages keep in the bucket, each with its one writer and reader: specs, champions, results, detections ...
May import core's foundations, ``core.contracts``, ``core.rules`` and ``core.services``.
Imported by the stages, the views, the trainer and the benches. Also: snapshots, retractions, labelled sets,
rejections, failing arrivals.
"""
