"""A dataset's champion model: the record (``landfall.champion/v1``), its history, and the guarded update.

    gs://BUCKET/models/<dataset>/champion.json          the champion now (rewritten, generation-guarded)
    gs://BUCKET/models/<dataset>/history/<n>.json       the n-th champion record, n = 1, 2, 3... (create-only)

The record names the champion run, its model URI (``runs/<job>/model``, which holds the SavedModel,
``normalization.json`` and ``threshold.json``), its evaluation figures, when it was promoted, by whom and
why: ``first`` (the dataset had no champion), ``evaluated`` (the challenger's loss was at most the
champion's x (1 + tolerance) on the challenger job's held-out data), ``forced`` (``landfall promote``) or
``rollback`` (``landfall rollback``). ``seq`` is its number in the history; ``previous`` the number of the
champion it replaced, so a rollback restores that one and a second rollback goes one further back.

Concurrency. ``champion.json`` is only ever written with ``ifGenerationMatch`` on the generation that was
read (0: create-only for the first), so of two jobs finishing together exactly one write lands; the other
gets ``AlreadyExists`` (412), re-reads the new champion, asks its ``decide`` callback again (the trainer
then evaluates the new champion on its own held-out data) and either replaces it or keeps it. Nothing is
overwritten unseen. History entries are created only after the champion write that made them true; a crash
between the two leaves the entry missing, and every later update first recreates the current champion's
entry (create-only, so idempotent): the history is complete up to the champion before the next change.
History objects are never rewritten, and no object grows with the history.

Used by the trainer (``trainer.judging.verdict``) and the CLI (``landfall promote``, ``landfall rollback``, ``status``).
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
from collections.abc import Callable
from typing import Any

from landfall.core import logs
from landfall.core.contracts.messages import decode, utc_now
from landfall.core.errors import AlreadyExists, NotFound, TemporaryError
from landfall.core.rules.series_windows import SAYS
from landfall.core.services.storage import Storage, is_gs, join

log = logs.get("landfall.core.champion")

CHAMPION_SCHEMA = "landfall.champion/v1"
THRESHOLD_SCHEMA = "landfall.threshold/v1"
CHAMPION = "champion.json"
HISTORY = "history"
THRESHOLD = "threshold.json"  # beside the model: the anomaly threshold and error quantiles
NORMALIZATION = "normalization.json"
# A champion's SavedModel serves one of two outputs (``serving_default``, the input ``x``): ``reconstruction`` (the
# window reconstructed, scored by its error) or ``row_scores`` (float32 ``[n, T]``: each window row's score, higher
# more anomalous, a detector that scores rather than reconstructs); ``normalization.json``'s ``unit`` (when set) is how
# its rows are scored from the windows over them (``landfall.core.rules.series_windows.COMBINE``), else the dataset's;
# its ``alone`` (true) says a row's score is its own in whatever window, so each row may be scored once.
RECONSTRUCTION, ROW_SCORES, UNIT, ALONE = "reconstruction", "row_scores", "unit", "alone"
MODELS_PREFIX = "models/"
REASONS = ("first", "evaluated", "forced", "rollback")
ATTEMPTS = 16


@dataclasses.dataclass(frozen=True)
class Champion:
    dataset: str
    run: str  # the job that trained it
    model: str  # its model URI (runs/<job>/model)
    seq: int  # its number in the history (1, 2, 3...)
    reason: str  # first | evaluated | forced | rollback
    promoted_by: str  # "trainer" or who asked (landfall promote / rollback)
    evaluation: dict[str, Any] = dataclasses.field(default_factory=dict)  # loss, champion_loss, instances...
    previous: int | None = None  # seq of the champion it replaced (rollback restores that one)
    rolled_back: int | None = None  # for a rollback: the seq it undid
    promoted_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = CHAMPION_SCHEMA
    # each file of the model folder by its path there: its SHA-256 when promoted (landfall.core.artifacts.model_files;
    # the scorer loads nothing else); None: promoted before files were recorded
    files: dict[str, str] | None = None

    @property
    def loss(self) -> float | None:
        """The loss it was promoted on (``evaluation.loss``); None when not recorded as a number."""
        value = self._evaluated("loss")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def detector(self) -> str | None:
        """The candidate it serves (``evaluation.detector``, the verdict's choice: a baseline's name or ``model``);
        None when not recorded as a name."""
        value = self._evaluated("detector")
        return value if isinstance(value, str) else None

    @property
    def serves(self) -> str:
        """What it serves, in words, from its record: the candidate, what it is and how its rows are scored
        (``evaluation``'s ``detector``, ``kind`` and ``unit``, as the verdict recorded them); "" when not recorded."""
        name = self.detector
        if name is None:
            return ""
        kind, unit = self._evaluated("kind"), self._evaluated("unit")
        said = [kind] if isinstance(kind, str) else []
        if isinstance(unit, str):
            said.append(f"rows scored: {SAYS.get(unit, unit)}")
        return f"{name} ({'; '.join(said)})" if said else name

    def _evaluated(self, key: str) -> Any:
        """``evaluation[key]``, or None: a champion.json whose ``evaluation`` is valid JSON of another type is read,
        not a crash (its readers show it: status, the page, the verdict)."""
        return self.evaluation.get(key) if isinstance(self.evaluation, dict) else None

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "champion") -> Champion:
        return decode(cls, text, CHAMPION_SCHEMA, where)  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True)
class Outcome:
    promoted: bool
    champion: Champion | None  # the champion after the decision
    replaced: Champion | None  # the one it replaced (promoted) or the one that stays (kept)


def bucket_root(bucket: str, models_prefix: str = MODELS_PREFIX) -> str:
    """Where a bucket's datasets keep their champions: ``gs://BUCKET/models``."""
    return f"gs://{bucket}/{models_prefix.strip('/')}"


def models_root(job_dir: str, models_prefix: str = MODELS_PREFIX) -> str:
    """Where a job dir's datasets keep their champions: ``gs://BUCKET/models`` for ``gs://BUCKET/<runs>/<job>``;
    for a local job dir ``<...>/runs/<job>``, the folder ``<...>/models`` beside ``runs`` (for any other local
    job dir, ``models`` beside the job dir)."""
    if is_gs(job_dir):
        return bucket_root(job_dir[5:].split("/", 1)[0], models_prefix)
    parent = os.path.dirname(os.path.abspath(job_dir.rstrip("/")))
    if os.path.basename(parent) == "runs":
        parent = os.path.dirname(parent)
    return os.path.join(parent, models_prefix.strip("/"))


def champion_uri(root: str, dataset: str) -> str:
    return join(root, dataset, CHAMPION)


def history_uri(root: str, dataset: str, seq: int) -> str:
    return join(root, dataset, HISTORY, f"{seq:08d}.json")


def who() -> str:
    """Who asked, for a forced promotion or a rollback: LANDFALL_ACTOR, else the login name."""
    actor = os.environ.get("LANDFALL_ACTOR")
    if actor:
        return actor
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def read(storage: Storage, root: str, dataset: str) -> tuple[Champion | None, int]:
    """The current champion and the generation it was read at (``None, 0`` when the dataset has none)."""
    uri = champion_uri(root, dataset)
    try:
        data, generation = storage.read_generation(uri)
    except NotFound:
        return None, 0
    return Champion.from_json(data, uri), generation


def read_history(storage: Storage, root: str, dataset: str, seq: int) -> Champion:
    uri = history_uri(root, dataset, seq)
    try:
        return Champion.from_json(storage.read_bytes(uri), uri)
    except NotFound:
        raise NotFound(f"champion history entry {uri} does not exist") from None


def _record_history(storage: Storage, root: str, champion: Champion) -> None:
    # Written before (or by a racer) is as good: history is create-only.
    storage.create(history_uri(root, champion.dataset, champion.seq), champion.to_json(),
                   content_type="application/json")


def update(storage: Storage, root: str, dataset: str,
           decide: Callable[[Champion | None], Champion | None]) -> Outcome:
    """The one guarded update. ``decide(current)`` returns the new record to install (its ``seq`` and
    ``previous`` are filled in here) or ``None`` to keep ``current``; after a lost race it is asked again
    with the champion that won."""
    for _ in range(ATTEMPTS):
        current, generation = read(storage, root, dataset)
        if current is not None:
            _record_history(storage, root, current)  # repairs a crash between a champion write and its entry
        proposal = decide(current)
        if proposal is None:
            return Outcome(False, current, current)
        new = dataclasses.replace(proposal, dataset=dataset, seq=(current.seq if current else 0) + 1,
                                  previous=proposal.previous if proposal.reason == "rollback" else (
                                      current.seq if current else None))
        try:
            storage.write_if_generation(champion_uri(root, dataset), new.to_json(), generation)
        except AlreadyExists:
            log.info("champion of %s changed while deciding; reading it again", dataset,
                     extra={"dataset": dataset, "fields": {"generation": generation}})
            continue
        _record_history(storage, root, new)
        log.info("champion of %s is now %s (%s)", dataset, new.run, new.reason,
                 extra={"dataset": dataset, "job": new.run,
                        "fields": {"seq": new.seq, "reason": new.reason, "replaced": current.run if current else None}})
        return Outcome(True, new, current)
    raise TemporaryError(f"the champion of {dataset} kept changing while updating it")


def beats(challenger_loss: float, champion_loss: float | None, tolerance: float) -> bool:
    """The promotion rule: at most the champion's loss x (1 + tolerance); any loss beats no champion."""
    return champion_loss is None or challenger_loss <= champion_loss * (1.0 + tolerance)


def promote_evaluated(storage: Storage, root: str, dataset: str, *, run: str, model: str, loss: float,
                      evaluate: Callable[[Champion], float | None], tolerance: float = 0.0,
                      evaluation: dict[str, Any] | None = None, metric: str = "loss",
                      better: Callable[[float, float | None], bool] | None = None,
                      files: dict[str, str] | None = None) -> tuple[Outcome, float | None]:
    """Promotes the challenger ``run`` if it beats the champion, which ``evaluate`` scores on the same
    instances (``None``: the champion cannot be evaluated, so the challenger replaces it). Returns the
    outcome and the champion's loss it was compared with (of the last champion looked at). ``metric`` names the
    loss in the champion's ``evaluation`` (``loss``, or ``detection_loss``: 1 - the detection score, issue #47);
    ``better(loss, champion_loss)`` replaces the rule ``beats`` (a margin instead of a tolerance)."""
    seen: dict[str, Any] = {"loss": None}

    def decide(current: Champion | None) -> Champion | None:
        if current is not None and current.run == run:  # our own write, seen after a retried request
            seen["loss"] = loss
            return None
        champion_loss = evaluate(current) if current is not None else None
        seen["loss"] = champion_loss
        if not (better(loss, champion_loss) if better is not None else beats(loss, champion_loss, tolerance)):
            return None
        return Champion(dataset=dataset, run=run, model=model, seq=0, reason="evaluated" if current else "first",
                        promoted_by="trainer", files=files,
                        evaluation={**(evaluation or {}), metric: loss, f"champion_{metric}": champion_loss,
                                    "champion_run": current.run if current else None, "tolerance": tolerance})

    outcome = update(storage, root, dataset, decide)
    if not outcome.promoted and outcome.champion is not None and outcome.champion.run == run:
        return Outcome(True, outcome.champion, None), seen["loss"]
    return outcome, seen["loss"]


def force(storage: Storage, root: str, dataset: str, *, run: str, model: str, evaluation: dict[str, Any],
          by: str, files: dict[str, str] | None = None) -> Outcome:
    """``landfall promote``: makes ``run`` the champion whatever the losses say, recording who asked (and the
    model's ``files``, as the person promoted them)."""
    def decide(current: Champion | None) -> Champion | None:
        return Champion(dataset=dataset, run=run, model=model, seq=0, reason="forced", promoted_by=by,
                        evaluation=dict(evaluation), files=files)

    return update(storage, root, dataset, decide)


def rollback(storage: Storage, root: str, dataset: str, *, by: str) -> Outcome:
    """``landfall rollback``: the champion before the current one becomes the champion again (a new history
    entry, ``reason: rollback``). ``NotFound`` when there is nothing to roll back to."""
    def decide(current: Champion | None) -> Champion | None:
        if current is None:
            raise NotFound(f"dataset {dataset} has no champion to roll back")
        if not current.previous:
            raise NotFound(f"the champion of {dataset} ({current.run}) has no previous champion")
        before = read_history(storage, root, dataset, current.previous)
        return dataclasses.replace(before, reason="rollback", promoted_by=by, promoted_at=utc_now(),
                                   previous=before.previous, rolled_back=current.seq)

    return update(storage, root, dataset, decide)
