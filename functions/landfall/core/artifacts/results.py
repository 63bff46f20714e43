"""Every finished job announced once: the result message (``landfall.result/v1``) and its guard.

The message (topic ``landfall-training-results``, ordering key = dataset, attributes ``schema``, ``dataset``,
``job``, ``status``, ``verdict``): ``dataset``, ``job``, ``status`` (``succeeded`` | ``failed``), ``verdict``
(``promoted`` | ``kept_champion`` | ``no_skill`` | ``low_average_precision`` | ``not_evaluated``),
``challenger_loss``, ``champion_loss``, ``baseline_loss`` and ``skill`` (``1 - challenger_loss / baseline_loss``)
with the ``min_skill`` it was held to, how its epochs ended (``epochs_run``, ``epochs_ceiling``, ``stopped_early``,
``best_epoch``, ``ceiling_gpu_seconds``: what training to the ceiling would have cost), ``labelled`` (the labelled
check's precision, recall and average precision of the challenger and the champion, when the spec names a labelled
set: ``trainer.judging.labelled_check``; null otherwise), ``model``
(this run's model URI, or null), ``champion`` (the dataset's champion model URI after the verdict),
``threshold``, ``champion_view`` (what the champion flagged in the job's new arrivals before training:
``trainer.judging.champion_view``; a bounded copy, ``champion_view_summary``), ``error`` (a failure's message),
``arrivals`` (``{count, ids, inputs}``: how many requests
the job covered, at most ``MAX_IDS`` of their ids, and the ``inputs.json`` URI that lists them all, so the
message never grows with history), ``published_by`` (``chief`` | ``reconciler``), ``finished_at``, and the
job's cost: ``gpu_seconds``, ``accelerator``, ``estimated_cost`` (USD) and ``cost_basis`` (``chief``: recorded by
the chief; ``job_object``: estimated by the reconciler from the job's start, end and resources, for a job that
ended without a chief to record it; ``landfall.core.rules.cost``). All four are null in a message from before they
existed, which still decodes.

The guard, ``runs/<job>/result.json``: the message is written there create-only *first*, then published,
then the marker is updated (generation-guarded) with ``published_at`` and the message id. Whoever finds a
marker without ``published_at`` publishes the message it holds (not a new one) and completes it. So:
- redelivery, a second chief attempt, a reconciler restart, the chief and the reconciler racing: one of
  them creates the marker; the others see it and send nothing once it is complete;
- a crash between the publish and the marker update sends the *same* message again on the next try
  (at-least-once, never lost). Consumers that must not see a result twice drop repeats by the message's
  ``job`` (it is the idempotency key: one result per job, whoever sends it).
We chose this over "marker means sent" (at-most-once) because a lost result leaves a verdict unannounced
for good, while a repeat is recognisable by its job.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from landfall.core import logs
from landfall.core.contracts.messages import JobInputs, decode, utc_now
from landfall.core.errors import AlreadyExists, Invalid, NotFound
from landfall.core.rules.series_windows import SAYS
from landfall.core.services.storage import Storage, join

log = logs.get("landfall.core.results")

RESULT_SCHEMA = "landfall.result/v1"
RESULT = "result.json"
RESULTS_TOPIC = "landfall-training-results"
MAX_IDS = 20  # arrivals listed by id in a message; the rest are counted, and listed in inputs.json
STATUSES = ("succeeded", "failed")
# no_skill: below the naive baseline's floor (trainer.judging.floor); low_average_precision: below the labelled check's.
VERDICTS = ("promoted", "kept_champion", "no_skill", "low_average_precision", "not_evaluated")
REFUSALS = ("no_skill", "low_average_precision")  # a model not promoted whatever the champion: worth an alert
# What metrics.json records of the skill (trainer.judging.floor) and of how the epochs ended
# (trainer.training.stopping): carried by the result message, and shown by `landfall status` and the report.
TRAINING_FIELDS = ("baseline_loss", "skill", "min_skill", "epochs_run", "epochs_ceiling", "stopped_early", "best_epoch",
                   "ceiling_gpu_seconds", "baselines", "min_skill_over", "beaten_by", "detection")
ATTEMPTS = 8


@dataclasses.dataclass(frozen=True)
class Result:
    dataset: str
    job: str
    status: str  # succeeded | failed
    verdict: str  # promoted | kept_champion | not_evaluated
    challenger_loss: float | None = None
    champion_loss: float | None = None
    model: str | None = None
    champion: str | None = None
    threshold: float | None = None
    error: str | None = None
    arrivals: dict[str, Any] = dataclasses.field(default_factory=dict)  # {count, ids, inputs}
    published_by: str = "chief"  # chief | reconciler
    finished_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = RESULT_SCHEMA
    gpu_seconds: float | None = None
    accelerator: str | None = None
    estimated_cost: float | None = None  # USD (landfall.core.rules.accelerators.prices()); None: unknown
    cost_basis: str | None = None  # chief | job_object (landfall.core.rules.cost)
    spec_generation: int | None = None  # the dataset spec the job ran under (landfall.core.artifacts.specs); None: none
    # The naive baseline and the skill over it (trainer.judging.floor); how the epochs ended
    # (trainer.training.stopping).
    baseline_loss: float | None = None
    skill: float | None = None
    min_skill: float | None = None
    epochs_run: int | None = None
    epochs_ceiling: int | None = None
    stopped_early: bool | None = None
    best_epoch: int | None = None
    ceiling_gpu_seconds: float | None = None
    # The detectors to beat (trainer.judging.baselines): {mean_window|pca|nearest_neighbour: {loss, skill, description,
    # ...}}, the margins promotion was held to over them, and the baselines that reconstruct better than the model (a
    # promoted model among them is named so wherever the verdict is shown); null in older messages.
    baselines: dict[str, Any] | None = None
    min_skill_over: dict[str, float] | None = None
    beaten_by: list[str] | None = None
    # The labelled check (trainer.judging.labelled_check), when the dataset's spec names a labelled set: {challenger:
    # {precision, recall, average_precision, threshold, flagged}, champion: the same or null (unknown: never evaluated
    # against labels), instances, positives, min_average_precision}; null without one.
    labelled: dict[str, Any] | None = None
    # The champion's view of the job's new arrivals (trainer.judging.champion_view), bounded (champion_view_summary):
    # {champion_run, threshold, instances, flagged, fraction, arrival_count, arrivals (the first MAX_IDS), reason};
    # flagged null (with the reason) when the dataset had no champion that could score; null in older messages.
    champion_view: dict[str, Any] | None = None
    # How the champion was chosen (trainer.judging.selection, issue #47): {select, basis, chosen, detector, score, why,
    # key: the candidates' figure the basis compares (kind_average_precision | labelled_average_precision),
    # candidates: {model|mean_window|pca|nearest_neighbour: {kind_average_precision, average_precision, vus_pr,
    # by_kind, labelled_average_precision}},
    # champion: the champion's score, surrogate: the set's description}; null in older messages and under select loss.
    detection: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise Invalid(f"result status {self.status!r} is not one of {STATUSES}")
        if self.verdict not in VERDICTS:
            raise Invalid(f"result verdict {self.verdict!r} is not one of {VERDICTS}")

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    def attributes(self) -> dict[str, str]:
        return {"schema": self.schema, "dataset": self.dataset, "job": self.job, "status": self.status,
                "verdict": self.verdict}

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "result") -> Result:
        return decode(cls, text, RESULT_SCHEMA, where)  # type: ignore[no-any-return]


def arrivals(storage: Storage, inputs_uri: str | None, max_ids: int = MAX_IDS) -> dict[str, Any]:
    """What the job covered, bounded: ``{count, ids (at most max_ids request ids), inputs}``."""
    if not inputs_uri:
        return {"count": 0, "ids": [], "inputs": None}
    try:
        inputs = JobInputs.from_json(storage.read_bytes(inputs_uri), inputs_uri)
    except (NotFound, Invalid):
        return {"count": None, "ids": [], "inputs": inputs_uri}
    ids = [str(r.get("request_id")) for r in inputs.requests]
    return {"count": len(ids), "ids": ids[:max_ids], "inputs": inputs_uri}


def from_metrics(doc: dict[str, Any], *, job: str, dataset: str, status: str, inputs_uri: str | None,
                 storage: Storage, published_by: str, error: str | None = None,
                 estimate: dict[str, Any] | None = None) -> Result:
    """The message for a job from its ``metrics.json`` (possibly empty: a job that died early); its cost from
    the chief's fields there, else ``estimate`` (the reconciler's, from the job object)."""
    verdict = doc.get("verdict") if status == "succeeded" else None
    costed = doc if isinstance(doc.get("gpu_seconds"), int | float) else (estimate or {})
    return Result(
        dataset=dataset or str(doc.get("dataset") or ""), job=job, status=status,
        verdict=verdict if verdict in VERDICTS else "not_evaluated",
        challenger_loss=doc.get("challenger_loss"), champion_loss=doc.get("champion_loss"),
        model=doc.get("model") if status == "succeeded" else None, champion=doc.get("champion"),
        threshold=(doc.get("threshold") or {}).get("value") if isinstance(doc.get("threshold"), dict) else None,
        error=error if error is not None else (doc.get("error") if status == "failed" else None),
        arrivals=arrivals(storage, inputs_uri), published_by=published_by,
        finished_at=str(doc.get("ended_at") or utc_now()),
        gpu_seconds=costed.get("gpu_seconds"), accelerator=costed.get("accelerator"),
        estimated_cost=costed.get("estimated_cost"), cost_basis=costed.get("cost_basis") if costed else None,
        spec_generation=_spec_generation(doc, storage, inputs_uri),
        **{k: doc.get(k) for k in TRAINING_FIELDS},
        labelled=doc.get("labelled") if isinstance(doc.get("labelled"), dict) and status == "succeeded" else None,
        champion_view=champion_view_summary(doc.get("champion_view")),
    )


VIEW_FIELDS = ("champion_run", "champion_model", "threshold", "threshold_quantile", "instances", "flagged", "fraction",
               "arrival_count", "reason")


def champion_view_summary(view: Any, max_ids: int = MAX_IDS) -> dict[str, Any] | None:
    """The message's copy of ``metrics.json`` ``champion_view``: its totals and at most ``max_ids`` arrivals."""
    if not isinstance(view, dict):
        return None
    arrivals = view.get("arrivals") if isinstance(view.get("arrivals"), list) else None
    return {**{k: view.get(k) for k in VIEW_FIELDS},
            "arrivals": None if arrivals is None else [
                {k: a.get(k) for k in ("arrival", "instances", "flagged", "fraction")} for a in arrivals[:max_ids]]}


def baselines_line(doc: Any) -> str:
    """One line for ``landfall status``, ``trace`` and the report: the model's skill over each baseline, and the
    baselines that beat it (``trainer.judging.baselines``); "" without them (older jobs, unjudged ones)."""
    found = doc.get("baselines") if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        return ""
    parts = [f"{name} {v['skill']:+.3f}" for name, v in found.items()
             if isinstance(v, dict) and isinstance(v.get("skill"), int | float)]
    line = "skill over the baselines: " + (", ".join(parts) or "none computed")
    beaten = [b for b in (doc.get("beaten_by") or []) if isinstance(b, str)]
    if beaten:
        line += ("; BEATEN BY " + ", ".join(beaten)
                 + (" (promoted all the same: not in its dataset's gate)" if doc.get("verdict") == "promoted" else ""))
    return line


def candidates(doc: Any) -> list[dict[str, Any]]:
    """A job's candidates (``metrics.json``'s ``detection`` and ``baselines``), the chosen one first, then by the score
    the choice rested on: ``name``, ``kind`` (what it is, in words), ``unit`` (how its rows are scored when served:
    its own, or ``dataset``: the dataset's) and ``unit_says`` (the same in words), ``score``, ``labelled`` (its
    labelled average precision), ``loss`` and ``skill`` (a reconstruction's held-out loss and the model's skill over
    it) and ``chosen``; [] without detection figures."""
    found = doc.get("detection") if isinstance(doc, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("candidates"), dict):
        return []
    described = doc.get("baselines") if isinstance(doc.get("baselines"), dict) else {}
    key = str(found.get("key") or "average_precision")

    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    out = []
    for name, figures in found["candidates"].items():
        figures = figures if isinstance(figures, dict) else {}
        about = described.get(name) if isinstance(described.get(name), dict) else {}
        kind = "the model the job trained" if name == "model" else str(about.get("description") or name)
        unit = about.get("unit") if isinstance(about.get("unit"), str) else None
        out.append({"name": str(name), "kind": kind, "unit": unit or "dataset",
                    "unit_says": SAYS.get(unit, unit) if unit else "the dataset's (shape.window.combine)",
                    "score": number(figures.get(key)), "labelled": number(figures.get("labelled_average_precision")),
                    "loss": number(about.get("loss")) if name != "model" else number(doc.get("challenger_loss")),
                    "skill": number(about.get("skill")), "chosen": name == found.get("chosen")})
    return sorted(out, key=lambda r: (not r["chosen"], -(r["score"] if r["score"] is not None else -1.0)))


def detection_line(doc: Any) -> str:
    """One line for ``landfall status``, ``trace`` and the report: which candidate detects best and by what
    (``trainer.judging.selection``), each candidate's score and the champion's; "" without them (older jobs, select
    loss)."""
    found = doc.get("detection") if isinstance(doc, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("candidates"), dict):
        return ""
    basis = str(found.get("basis") or "score")
    # the figure the basis compares; a summary from before it named one (issue #47's first rule) read as then
    old = "labelled_average_precision" if basis.startswith("labelled") else "average_precision"
    key = str(found.get("key") or old)
    scores = {str(n): f.get(key) for n, f in found["candidates"].items() if isinstance(f, dict)}
    parts = [f"{n} {v:.3f}" for n, v in sorted(scores.items(), key=lambda kv: -(kv[1] or 0.0))
             if isinstance(v, int | float)]
    chosen = found.get("chosen")
    name = chosen if isinstance(chosen, str) else "none that may be promoted"
    said = next((r for r in candidates(doc) if r["chosen"]), None)
    if said is not None:  # what it is and how its rows are scored, in words
        name += f" [{said['kind']}; rows scored: {said['unit_says']}]"
    # trainer.judging.selection.FIXED_FOR_ROWS: a rule chose, the scores are recorded
    if basis.startswith("the fixed choice"):
        line = f"chosen: {name} ({basis}; {key}: "
    else:
        line = f"detects best: {name} ({basis}: "
    line += (", ".join(parts) or "none computed") + ")"
    champion = found.get("champion") if isinstance(found.get("champion"), dict) else None
    if champion and isinstance(champion.get(key), int | float):
        line += f"; champion {champion.get('run')} {champion[key]:.3f}"
    return line


def champion_view_line(view: Any) -> str:
    """One line for ``landfall status``, ``trace`` and the report: what the champion flagged in the new arrivals."""
    if not isinstance(view, dict):
        return ""
    if view.get("flagged") is None:
        return f"champion's view of new data: none ({view.get('reason') or 'unknown'})"
    if not view.get("arrival_count"):
        return f"champion's view of new data: no new arrival since {view.get('champion_run')}'s job"
    worst = max(view.get("arrivals") or [{}], key=lambda a: a.get("fraction") or 0.0)
    out = (f"champion's view of new data: {view['flagged']} of {view.get('instances')} instances in "
           f"{view.get('arrival_count')} new arrival(s) over champion {view.get('champion_run')}'s threshold "
           f"{_g(view.get('threshold'))}")
    if worst.get("arrival") or worst.get("manifest"):
        out += (f" (most: {worst.get('arrival') or worst.get('manifest')}, {worst.get('flagged')} of "
                f"{worst.get('instances')})")
    return out


def _g(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, int | float) else str(value)


def _spec_generation(doc: dict[str, Any], storage: Storage, inputs_uri: str | None) -> int | None:
    """From ``metrics.json``; for a job that died before writing it, from its ``inputs.json``."""
    if "spec_generation" in doc or not inputs_uri:
        found = doc.get("spec_generation")
        return found if isinstance(found, int) and not isinstance(found, bool) else None
    try:
        return JobInputs.from_json(storage.read_bytes(inputs_uri), inputs_uri).spec_generation
    except (NotFound, Invalid):
        return None


def marker_uri(job_dir: str) -> str:
    return join(job_dir, RESULT)


def read_marker(storage: Storage, job_dir: str) -> dict[str, Any] | None:
    try:
        raw = json.loads(storage.read_bytes(marker_uri(job_dir)))
    except NotFound:
        return None
    except ValueError:
        return None
    return raw if isinstance(raw, dict) else None


def announce(storage: Storage, pubsub: Any, topic: str, job_dir: str, result: Result) -> bool:
    """Publishes ``result`` unless the job's result was published already; True if this call published.

    Create-only marker first, then publish, then complete the marker (see the module docstring). A marker
    left incomplete by a crash is published as it stands: the message first decided, not ``result``."""
    uri = marker_uri(job_dir)
    for _ in range(ATTEMPTS):
        try:
            data, generation = storage.read_generation(uri)
        except NotFound:
            body = {"message": json.loads(result.to_json()), "published_at": None, "message_id": None}
            try:
                generation = storage.write_if_generation(uri, json.dumps(body, sort_keys=True).encode(), 0)
            except AlreadyExists:
                continue  # someone else decided first: read what they decided
            data = json.dumps(body, sort_keys=True).encode()
        try:
            body = json.loads(data)
            message = Result.from_json(json.dumps(body["message"]), uri)
        except (ValueError, KeyError, TypeError, Invalid) as exc:
            raise Invalid(f"{uri}: not a result marker: {exc}") from None
        if body.get("published_at"):
            return False
        message_id = pubsub.publish(topic, message.to_json(), message.attributes(), ordering_key=message.dataset)
        done = {**body, "published_at": utc_now(), "message_id": message_id}
        try:
            storage.write_if_generation(uri, json.dumps(done, sort_keys=True).encode(), generation)
        except AlreadyExists:
            # Another sender completed it meanwhile (it published too: a repeat, recognisable by job).
            log.warning("result of %s was published by two senders at once", message.job,
                        extra={"job": message.job, "dataset": message.dataset})
        log.info("result published", extra={"job": message.job, "dataset": message.dataset,
                                            "fields": {"status": message.status, "verdict": message.verdict,
                                                       "message_id": message_id, "topic": topic,
                                                       "published_by": message.published_by}})
        return True
    raise AlreadyExists(f"{uri}: kept changing while announcing the result")
