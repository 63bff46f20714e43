"""The champions a verdict compares its challenger with, each loaded and scored once (``trainer.judging.verdict``).

A verdict may compare with more than one champion: a job that loses the promotion race evaluates the new champion
and compares again (``landfall.core.artifacts.champion.promote_evaluated``). Each champion's model is loaded once, from
the
job's cache folder, and scored on what the verdict judges by:
- its reconstruction loss on the held-out windows (the same instances as the challenger's, measured in the job's
  ``error_scale``: ``landfall.core.scoring.Scorer.measured_in``, so the two losses are on one scale);
- its figures on the labelled set at its own threshold, when the job has one (``labelled_figures``: as it serves,
  in its own scale, which its threshold is in);
- its figures on the surrogate set, under ``--select detection`` (``trainer.judging.surrogate``), in the job's scale.
A champion that cannot score (its model gone or unloadable) is ``None`` throughout: the challenger replaces it. A
temporary error (the bucket answering 503) is raised: the platform retries the job's verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from landfall.core import logs, scoring
from landfall.core.artifacts import champion as champion_mod
from landfall.core.errors import TemporaryError
from landfall.core.services.storage import Storage
from trainer import stopwatch
from trainer.judging import labelled_check

log = logs.get("trainer.judging.verdict")

SPAN = "scoring the champion"  # its span in the job's timeline (trainer.stopwatch)


def labelled_figures(scorer: scoring.Scorer, labelled_set: Any, threshold: float | None, run: str,
                     who: str) -> dict[str, Any] | None:
    """``scorer``'s precision and recall at ``threshold`` (None without one: unknown) and average precision on the
    set; None (unknown, never zero) when it cannot score it (another shape, a broken model)."""
    try:
        errors = scorer.errors_of([labelled_set.instances])
        buffer = int(labelled_set.instances.shape[1])  # the window: VUS-PR's largest buffer
        if threshold is None:
            return {"precision": None, "recall": None, "flagged": None, "threshold": None,
                    **labelled_check.ranking(labelled_set.labels, errors, buffer)}
        return labelled_check.at_threshold(labelled_set.labels, errors, threshold, buffer).as_dict()
    except TemporaryError:
        raise
    except Exception as exc:
        log.warning(f"{who} cannot score the labelled set ({exc}): unknown", extra={"job": run})
        return None


class ChampionScores:
    """Each champion's loss, labelled figures and surrogate figures (module doc), keyed by its model URI, in the
    order they were scored (the last is the one the verdict compared with)."""

    def __init__(self, storage: Storage, cache_dir: str, held_out: Callable[[], Iterator[np.ndarray]], run: str,
                 dataset: str, labelled_set: Any = None, surrogate_set: Any = None, scale: Any = None) -> None:
        self.storage, self.cache_dir, self.held_out = storage, cache_dir, held_out
        self.scale = scale  # the job's error_scale (None: original units)
        self.run, self.dataset = run, dataset
        self.labelled_set, self.surrogate_set = labelled_set, surrogate_set
        self.losses: dict[str, float | None] = {}
        self.labelled: dict[str, dict[str, Any] | None] = {}
        self.surrogate: dict[str, dict[str, Any] | None] = {}

    def score(self, current: champion_mod.Champion) -> float | None:
        """Scores ``current`` once; its held-out loss (None: it cannot score, so it is replaced)."""
        if current.model in self.losses:
            return self.losses[current.model]
        t0 = time.monotonic()
        loss: float | None = None
        try:
            with stopwatch.span(SPAN):
                scorer = scoring.Scorer.load(self.storage, current.model, self.cache_dir, current.files)
                judged = scorer.measured_in(self.scale)
                if self.surrogate_set is not None:
                    self.surrogate[current.model] = self.surrogate_set.figures(
                        judged.window_scores(self.surrogate_set.instances))
                loss = float(judged.errors_of(self.held_out()).mean())  # type: ignore[arg-type]
                if self.labelled_set is not None:  # at the champion's own threshold
                    self.labelled[current.model] = labelled_figures(
                        scorer, self.labelled_set, (scorer.threshold or {}).get("value"), self.run,
                        f"champion {current.run}")
        except TemporaryError:
            raise
        except Exception as exc:  # gone or unloadable: a champion that cannot score is replaced
            log.warning(f"champion {current.run} cannot be evaluated ({exc}); the challenger replaces it",
                        extra={"job": self.run, "dataset": self.dataset, "fields": {"champion_model": current.model}})
            loss = None
            self.surrogate[current.model] = None
        self.losses[current.model] = loss
        log.info("champion evaluated", extra={"job": self.run, "dataset": self.dataset, "fields": {
            "champion_run": current.run, "champion_loss": loss, "wall_s": round(time.monotonic() - t0, 3)}})
        return loss

    def last(self) -> str | None:
        """The model URI of the champion scored last (the one the verdict compared with)."""
        return next(reversed(self.losses), None)
