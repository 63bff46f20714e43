"""The trainer's training half: what a worker reads, how it learns, when it stops and how it survives a restart.

The input (``inputs``: the plan, which records each worker reads; ``pipeline``, ``windows`` and ``iterators``: the
tf.data pipeline that reads them), the strategy's cluster (``cluster``: ``TF_CONFIG``), the model (``model``, one of
``model_kinds``), training to convergence (``stopping``: what the rule has seen, kept with the backup), the warm
start (``warmstart``) and a Spot node's notice (``preemption``). The run (``trainer.train``) calls it, then the judging
half (``trainer.judging``); nothing here imports judging, so the candidate pool grows without touching the training
loop (docs/architecture.md, "The trainer, in two halves").
"""
