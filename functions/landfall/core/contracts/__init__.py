"""What the stages exchange: messages and records, the TFRecord format, the bucket layout, events, the timeline.
May import core's foundations (``config``, ``errors``, ``logs``) and ``core.rules``; no service.
Imported by ``core.services``, ``core.artifacts``, ``core.quality``, every stage, the trainer and the benches.
"""
