"""What the stages exchange: the messages and records (manifest, request, result, rejection, job inputs),
the TFRecord format, the bucket layout and its ids, the events the functions receive, a job's timeline.
May import ``core``'s foundations (``config``, ``errors``, ``logs``) and ``core.rules``; no service.
Imported by every subpackage of ``core`` but ``rules``, every stage, the trainer and the benches.
"""
