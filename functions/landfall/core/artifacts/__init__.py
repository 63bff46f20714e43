"""What the stages keep in the bucket, each with its one writer and reader: dataset specs, the champion and
its history, results, detections, snapshots, retractions, labelled sets, rejections.
May import ``core``'s foundations, ``core.contracts``, ``core.rules`` and ``core.services``.
Imported by the stages, the views, the trainer and the benches.
"""
