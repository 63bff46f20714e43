"""The trainer's judging half: the candidates, how they are compared and what is promoted.

The candidates (``baselines``: the fixed detectors' registry, one module each; ``detectors``: one saved as a servable
champion; ``floor``: the mean window every model must beat), how they are compared (``surrogate``: synthetic
anomalies in held-out windows; ``labelled_check``: the labelled set; ``champion_scores``: each compared champion
scored once), which one wins (``selection``) and the verdict after fit (``verdict``), and the champion's view of a
job's new data before it trains (``champion_view``). It reads the held-out windows through the training half's input
(``trainer.training``); the training half never imports it (docs/architecture.md, "The trainer, in two halves").
"""
