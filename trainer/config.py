"""The trainer's typed configuration: defaults, then ``LANDFALL_<FIELD>`` environment variables, then flags.

Read once in ``trainer.task`` and passed explicitly; nothing else reads the environment (except
``TF_CONFIG``, which belongs to the cluster, see ``trainer.training.cluster``).

Both halves of the trainer read it, so it imports neither: what its checks need is here, the model kinds' names
(``MODEL_KINDS``), the baselines ``min_skill_over`` may name (``SKILL_OVER``, ``parse_margins``) and the early stopping
rule (``Rule``: the setting; ``trainer.training.stopping`` keeps what the rule has seen).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from landfall.core.config import Seed, Settings, default_project
from landfall.core.rules import holdout
from landfall.core.rules.series_windows import COMBINE, MEAN

# The model kinds a job can train (trainer.training.model_kinds, one module each, named so): the one list the config's
# check, the flag and the registry read, here so that the settings are checked without importing the model kinds.
MODEL_KINDS = ("gru", "dense", "conv", "forecast")
# The baselines ``min_skill_over`` may gate on (trainer.judging.baselines.PCA and NEAREST, checked the same by
# tests/trainer/test_baselines.py): the flag is parsed here, without importing the detectors.
SKILL_OVER = ("pca", "nearest_neighbour")


def parse_margins(text: str) -> dict[str, float]:
    """``--min-skill-over``: ``NAME=MARGIN[,NAME=MARGIN]`` (``none`` or empty: no gate), names among ``pca`` and
    ``nearest_neighbour``; raises ``ValueError`` naming the bad part."""
    out: dict[str, float] = {}
    text = (text or "").strip()
    if text.lower() in ("", "none"):
        return out
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in SKILL_OVER:
            raise ValueError(f"min skill over: {part.strip()!r} is not NAME=MARGIN with NAME {' or '.join(SKILL_OVER)}")
        margin = float(value)
        if margin > 1.0:
            raise ValueError(f"min skill over {name} must be <= 1, got {margin}")
        out[name] = margin
    return out


# -- the stopping rule (trainer.training.stopping: training to convergence, the state it keeps) --------------
def auto_patience(ceiling: int) -> int:
    """Patience for a ceiling of ``ceiling`` epochs: 10 % of it, at least 3 (``Rule.auto``)."""
    return max(3, math.ceil(ceiling / 10))


def auto_smoothing(ceiling: int) -> int:
    """Smoothing for a ceiling of ``ceiling`` epochs: 5 % of it, at least 1 (``Rule.auto``)."""
    return max(1, math.ceil(ceiling / 20))


MIN_GAIN = 0.01  # Rule.min_gain's default (trainer.training.stopping's doc)
AUTO_CEILING = 200  # a Rule() given no patience or smoothing is Rule.auto(AUTO_CEILING)'s


@dataclasses.dataclass(frozen=True)
class Rule:
    """The early stopping rule, a setting (``training.early_stopping``, ``LANDFALL_EARLY_STOPPING_*``): how it judges
    the held-out loss is ``trainer.training.stopping``'s doc, what it has seen its ``State``."""

    # The rule's defaults, written here only: TrainerConfig leaves each field unset (None) to get them; the pages and
    # the spec's JSON Schema that repeat them are checked against these (tests/trainer/test_stopping.py).
    patience: int = auto_patience(AUTO_CEILING)  # epochs in a row without improvement before a reduction or the
    # stop; 0: off
    min_delta: float = 0.005  # an improvement: the monitored value < the last improvement's x (1 - min_delta)
    min_gain: float = MIN_GAIN  # ... and lower by more than this fraction of the run's gain so far
    start_from_epoch: int = 0  # epochs (1-based count) before monitoring starts
    reductions: int = 0  # plateaus met by lowering the learning rate before one stops the run
    factor: float = 0.3  # the learning rate is multiplied by this at each reduction
    smoothing: int = auto_smoothing(AUTO_CEILING)  # the monitored value: the mean val_loss of this many last epochs

    def __post_init__(self) -> None:
        if (self.patience < 0 or not 0.0 <= self.min_delta < 1.0 or self.start_from_epoch < 0 or self.reductions < 0
                or not 0.0 < self.factor < 1.0 or self.smoothing < 1 or not 0.0 <= self.min_gain < 1.0):
            raise ValueError(f"early stopping: patience must be >= 0, min_delta in [0, 1), start_from_epoch >= 0, "
                             f"reductions >= 0, factor in (0, 1), smoothing >= 1 and min_gain in [0, 1), got "
                             f"{self.patience}, {self.min_delta}, {self.start_from_epoch}, {self.reductions}, "
                             f"{self.factor}, {self.smoothing}, {self.min_gain}")

    @classmethod
    def auto(cls, ceiling: int, **given: Any) -> Rule:
        """The rule for a ceiling of ``ceiling`` epochs: ``patience`` and ``smoothing`` not given (None) scale
        with it, 10 % and 5 % of it (at least 3 and 1): 20 and 10 for a 200-epoch ceiling, 3 and 1 for the
        seed's 10. The ceiling is the user's budget: a long one says the model learns slowly, and a slow
        learner's noise needs a long look before one calls it a plateau; a short one cannot afford it."""
        fields = {k: v for k, v in given.items() if v is not None}
        fields.setdefault("patience", auto_patience(ceiling))
        fields.setdefault("smoothing", auto_smoothing(ceiling))
        return cls(**fields)

    @property
    def active(self) -> bool:
        return self.patience > 0

    def describe(self) -> dict[str, Any]:
        return {"patience": self.patience, "min_delta": self.min_delta, "min_gain": self.min_gain,
                "start_from_epoch": self.start_from_epoch,
                "reductions": self.reductions, "factor": self.factor, "smoothing": self.smoothing,
                "monitor": "val_loss" if self.smoothing == 1 else f"mean val_loss of the last {self.smoothing} epochs",
                "min_delta_is": "a fraction of the last improvement's val_loss",
                "min_gain_is": "a fraction of the run's gain so far (first monitored value - last improvement's)"}


@dataclasses.dataclass(frozen=True)
class TrainerConfig(Settings):
    manifests: tuple[str, ...] = ()
    job_dir: str = ""
    job_name: str = ""  # default: the last path segment of job_dir
    epochs: int = Seed.EPOCHS
    batch_size_per_worker: int = Seed.BATCH_SIZE_PER_WORKER  # as in the seed
    # A small dataset's batch is lowered (not below trainer.training.inputs.MIN_BATCH) until an epoch has this many
    # steps: at the seed's 1024, 900 windows made one optimizer step an epoch (issue #47). 0: the batch as given.
    min_steps_per_epoch: int = 16
    learning_rate: float = 1e-3
    validation_fraction: float = 0.1
    seed: int = 42
    # random | segment | blocks (landfall.core.rules.holdout): segment holds out one run per arrival with a gap of a
    # window.
    holdout: str = "random"
    # The model (the seed's: encoder GRU 128 -> 32, decoder 32 -> 128, dense back to F features).
    timesteps: int = Seed.TIMESTEPS
    features: int = Seed.FEATURES
    units: tuple[int, ...] = Seed.UNITS
    dropout: float = 0.2
    # trainer.training.model_kinds: gru (the seed's recurrent autoencoder) | dense | conv | forecast
    model_kind: str = "gru"
    normalize: bool = True  # per-feature (x - mean) / std from the manifests' stats
    warm_start: str = "auto"  # auto (the dataset's newest succeeded model) | none | a model URI
    # Input pipeline.
    shuffle_buffer: int = 16384
    # Staging is latency-bound on Cloud Storage (tens of ms a small object) before compaction (one file per
    # arrival): 32 at a time; on the CPU-bound emulator 8 and 32 stage alike (2,000 files: 5.2-5.6 s either way).
    download_workers: int = 32
    verify_crc32c: bool = True  # check every staged shard against the manifest's crc32c
    work_dir: str = ""  # local scratch (staged shards, checkpoints before upload); default under $TMPDIR
    # Distribution.
    collective: str = "auto"  # auto | ring | nccl
    collective_timeout_s: float = 0.0  # 0: no per-collective timeout
    health_check_interval_s: float = 30.0  # how often MultiWorkerMirroredStrategy pings its peers
    # Optimizer steps run in one call into TensorFlow (Keras's steps_per_execution). 1: measured no faster at 4 on
    # CPU (docs/benchmarks.md, "What a job pays for distribution"); XLA (jit_compile) is not offered: it has no CPU
    # collectives (a two-worker CPU job fails) and ran the GRU 8x slower on one CPU worker.
    steps_per_execution: int = 1
    verbose: int = 2  # Keras fit verbosity on stderr: 0 silent, 2 one line per epoch
    # The verdict (trainer.judging.verdict): evaluation against the champion, promotion, the result message.
    promote_tolerance: float = 0.0  # select loss: promoted when loss <= champion's x (1 + tolerance)
    # What the verdict promotes (trainer.judging.selection): detection (the candidate, the model or a baseline, that
    # detects best: labelled average precision when the dataset has a labelled set, else on synthetic anomalies injected
    # into held-out windows, trainer.judging.surrogate) | loss (the model, by held-out reconstruction loss: before #47).
    select: str = "detection"
    promote_margin: float = 0.01  # select detection: promoted when its score >= the champion's + this
    model_margin: float = 0.01  # select detection: the model ranks above a baseline when it scores this much more
    # How the dataset's rows will be scored (a series spec's shape.window.combine, landfall.core.rules.series_windows):
    # scored by rows, the label-free choice is the fixed one that beats it (trainer.judging.selection.basis).
    combine: str = MEAN
    threshold_quantile: float = 0.99  # of the held-out reconstruction errors: the anomaly threshold
    # The labelled check (trainer.judging.labelled_check): the set `landfall datasets apply` stored
    # (landfall.core.artifacts.labelled), scored
    # by every job with the challenger and the champion; below min_average_precision (when set) nothing is promoted.
    labelled: str = ""
    min_average_precision: float | None = None
    # The floor (trainer.judging.floor): promoted only when 1 - loss / baseline loss >= min_skill (else no_skill).
    min_skill: float = 0.1
    # The detectors to beat (trainer.judging.baselines): NAME=MARGIN[,...] over pca and nearest_neighbour, promoted only
    # when 1 - loss / that baseline's loss >= MARGIN for each (else no_skill); "none": report them, gate on none.
    min_skill_over: str = "none"
    # The labelled check against the baselines: promoted only when the challenger's average precision on the labelled
    # set >= the best baseline's + this (None: not checked).
    min_average_precision_over_baselines: float | None = None
    # Training to convergence (trainer.training.stopping): epochs is the ceiling; patience 0 trains to it. A field left
    # unset (None) is Rule's default (above), written there only; patience and smoothing then scale with the
    # ceiling (Rule.auto).
    early_stopping_patience: int | None = None
    early_stopping_min_delta: float | None = None  # a fraction of the last improvement's monitored value
    early_stopping_min_gain: float | None = None  # a fraction of the run's gain so far
    early_stopping_start_from_epoch: int | None = None
    early_stopping_reductions: int | None = None  # plateaus met by lowering the learning rate before one stops the run
    early_stopping_factor: float | None = None  # the learning rate's multiplier at each reduction
    early_stopping_smoothing: int | None = None  # the monitored value: the mean val_loss of this many last epochs
    # Every epoch's input order a function of (seed, worker, epoch) (trainer.training.pipeline._deterministic): a
    # restarted run sees exactly the batches an uninterrupted one does. Off by default: it costs some read parallelism.
    deterministic: bool = False
    # training.exclude_flagged (trainer.judging.champion_view): instances of the new arrivals the champion flags are
    # left out of this job's training and held-out sets.
    exclude_flagged: bool = False
    results_topic: str = "landfall-training-results"  # "" publishes no result message
    # The dataset spec (landfall.core.artifacts.specs) the submit stage rendered the job from, recorded in metrics.json
    # and the result; its settings arrive as the flags above. None: no spec (the deployment's settings).
    spec_generation: int | None = None
    models: str = ""  # where champions live; default: gs://BUCKET/models (local: <job dir>/../../models)
    # What the job was given, for its cost (gpu_seconds, estimated_cost in metrics.json and the result): the
    # submit stage sets LANDFALL_GPUS_PER_WORKER and LANDFALL_ACCELERATOR on every worker (landfall.submit.tfjob).
    gpus_per_worker: int = 0
    accelerator: str = ""
    project: str = dataclasses.field(default_factory=default_project)

    def __post_init__(self) -> None:
        problems = []
        if self.epochs < 1:
            problems.append(f"epochs must be >= 1, got {self.epochs}")
        if self.min_steps_per_epoch < 0:
            problems.append(f"min steps per epoch must be >= 0, got {self.min_steps_per_epoch}")
        if self.batch_size_per_worker < 1:
            problems.append(f"batch size per worker must be >= 1, got {self.batch_size_per_worker}")
        if not 0.0 <= self.validation_fraction < 1.0:
            problems.append(f"validation fraction must be in [0, 1), got {self.validation_fraction}")
        if self.holdout not in holdout.MODES:
            problems.append(f"holdout must be one of {', '.join(holdout.MODES)}, got {self.holdout!r}")
        if self.learning_rate <= 0:
            problems.append(f"learning rate must be > 0, got {self.learning_rate}")
        if self.model_kind not in MODEL_KINDS:
            problems.append(f"model kind must be one of {', '.join(MODEL_KINDS)}, got {self.model_kind!r}")
        if not 0.0 <= self.dropout < 1.0:
            problems.append(f"dropout must be in [0, 1), got {self.dropout}")
        if len(self.units) < 1 or any(u < 1 for u in self.units):
            problems.append(f"units must be positive integers, got {self.units}")
        if self.timesteps < 1 or self.features < 1:
            problems.append(f"timesteps and features must be >= 1, got {self.timesteps}, {self.features}")
        if self.collective.lower() not in ("auto", "ring", "nccl"):
            problems.append(f"collective must be auto, ring or nccl, got {self.collective!r}")
        if self.steps_per_execution < 1:
            problems.append(f"steps per execution must be >= 1, got {self.steps_per_execution}")
        if self.gpus_per_worker < 0:
            problems.append(f"gpus per worker must be >= 0, got {self.gpus_per_worker}")
        if self.promote_tolerance < 0 or not 0.0 < self.threshold_quantile < 1.0:
            problems.append(f"promote tolerance must be >= 0 and threshold quantile in (0, 1), got "
                            f"{self.promote_tolerance}, {self.threshold_quantile}")
        if self.select not in ("detection", "loss"):
            problems.append(f"select must be detection or loss, got {self.select!r}")
        if self.combine not in COMBINE:
            problems.append(f"combine must be one of {', '.join(COMBINE)}, got {self.combine!r}")
        if not -1.0 < self.model_margin < 1.0:
            problems.append(f"model margin must be in (-1, 1), got {self.model_margin}")
        if not 0.0 <= self.promote_margin < 1.0:
            problems.append(f"promote margin must be in [0, 1), got {self.promote_margin}")
        if self.min_skill > 1.0:
            problems.append(f"min skill must be <= 1 (1 is a perfect reconstruction), got {self.min_skill}")
        try:
            self.skill_margins()
        except ValueError as exc:
            problems.append(str(exc))
        try:
            self.stopping_rule()
        except ValueError as exc:
            problems.append(str(exc))
        if self.min_average_precision is not None and not 0.0 <= self.min_average_precision <= 1.0:
            problems.append(f"min average precision must be in [0, 1], got {self.min_average_precision}")
        if problems:
            raise ValueError("; ".join(problems))

    def stopping_rule(self) -> Rule:
        return Rule.auto(self.epochs, patience=self.early_stopping_patience, min_delta=self.early_stopping_min_delta,
                         min_gain=self.early_stopping_min_gain,
                         start_from_epoch=self.early_stopping_start_from_epoch,
                         reductions=self.early_stopping_reductions, factor=self.early_stopping_factor,
                         smoothing=self.early_stopping_smoothing)

    def skill_margins(self) -> dict[str, float]:
        """``min_skill_over`` parsed: baseline name -> the skill over it promotion needs (trainer.judging.baselines)."""
        return parse_margins(self.min_skill_over)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.timesteps, self.features)
