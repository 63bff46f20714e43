"""Every retrain ends in a verdict: evaluated against the champion, promoted or not, announced.

``conclude`` (the chief, after the model is saved, before metrics say ``succeeded``):
1. Evaluation on common ground. The challenger (the model in memory) and the dataset's champion (the model
   ``models/<dataset>/champion.json`` names) are scored on the same instances: the held-out records of this
   job's plan that the chief holds. Each model normalises with its own statistics and its reconstructions
   are de-normalised, so the loss is the reconstruction MSE with each feature in this job's ``error_scale``
   (``landfall.core.scoring``: the champion too, whatever scale it serves in). On several workers the chief evaluates
   its own share of the held-out split (``Plan.val_slices`` of worker 0, about ``1/num_workers`` of it): the split
   is a deterministic function of
   (seed, shard URI, record index) and the shares are contiguous runs of it, so both models see exactly the
   same instances and a rerun sees them again; staging the other workers' shards would cost a second
   download for a sample that is already unbiased. The held-out windows are read once and kept in memory
   (up to ``HELD_OUT_CACHE_BYTES``) for every pass over them: the challenger's, the baselines', each champion's.
2. The threshold. The challenger's per-instance errors give the quantiles p50, p95, p99, p99.9 and the
   anomaly threshold (the ``threshold_quantile``, default p99), written beside the model as ``threshold.json``.
3. Promotion with a guard (``landfall.core.artifacts.champion``): promoted when its loss <= the champion's x
   (1 + ``promote_tolerance``), or when the dataset has no champion (or one whose model cannot be loaded any
   more); the write is conditional on ``champion.json``'s generation, and a job that loses the race
   evaluates the new champion and compares again.
4. An absolute floor before any comparison (``trainer.judging.floor``): a naive baseline, the training set's mean
   window, is scored on the same held-out instances; the challenger's ``skill`` is
   ``1 - challenger_loss / baseline_loss``. Below ``min_skill`` (spec ``verdict.min_skill``, default 0.1:
   ``TrainerConfig.min_skill``) the verdict is ``no_skill``: nothing is promoted, not even a dataset's
   first model, and the champion (still evaluated on the same instances, for the record) is kept. So a model
   that learned nothing (noise data, a broken scaling, a model stopped far too early) never becomes a champion,
   and two bad models in a row cannot compare as "fine".
5. The labelled check (``trainer.judging.labelled_check``), when the job has a labelled set (``--labelled``, from the
   spec's ``verdict.labelled``): the challenger (at its threshold) and the champion it is compared with (at the
   champion's own threshold) are scored on it: precision, recall, average precision. A champion that cannot score it is
   unknown (null), never zero. With ``min_average_precision`` (spec ``verdict.min_average_precision``) a challenger
   below it, or one whose set cannot be read, is ``low_average_precision``: nothing is promoted, not even a
   dataset's first model (checked after ``no_skill``).
Returns the fields for ``metrics.json``: ``verdict`` (``promoted`` | ``kept_champion`` | ``no_skill`` |
``low_average_precision`` | ``not_evaluated``), ``baseline_loss``, ``skill``, ``min_skill``, ``labelled``,
``challenger_loss``, ``champion_loss``, ``champion`` (the champion's model URI after the verdict),
``champion_run``, ``threshold`` and ``evaluation``. ``not_evaluated``: no held-out instance on the chief
(``--validation-fraction 0``, or too little data), or a job over several datasets.

``model`` is the chief's local SavedModel folder (as ``trainer.train`` passes it) or a Keras model. The trainer
passes the folder: under MultiWorkerMirroredStrategy a BatchNormalization statistic is a sync-on-read
variable, and calling the in-memory model on the chief alone would read it with an all-reduce the other
workers, already gone, never join.

``publish_result`` (the chief, at the very end): the job's one ``landfall.result/v1`` message
(``landfall.core.artifacts.results``), guarded by ``runs/<job>/result.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np

from landfall.core import logs, scoring
from landfall.core.artifacts import champion as champion_mod
from landfall.core.artifacts import model_files, results
from landfall.core.errors import TemporaryError
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage, is_gs
from trainer import stopwatch
from trainer.config import TrainerConfig
from trainer.jobdir import MODEL, JobDir
from trainer.judging import baselines, detectors, floor, labelled_check, selection, surrogate
from trainer.judging.champion_scores import ChampionScores, labelled_figures
from trainer.training import iterators
from trainer.training.inputs import Inputs, Plan, arrival_key, inputs_uri

log = logs.get("trainer.judging.verdict")

# The passes of ``conclude``, each timed in the job's timeline (``trainer.stopwatch``, issue #42).
LOAD = "loading the challenger"
BASELINES = "fitting the baselines"
HELD_OUT = "scoring the held-out windows"
READ_HELD_OUT = "reading the held-out windows"
BASELINES_HELD_OUT = "the baselines on the held-out windows"
THRESHOLD = "the threshold"
LABELLED = "the labelled check"
PROMOTE = "the verdict"
SURROGATE = "the surrogate set"
EXPORT = "saving the chosen baseline"


def _held_out(plan: Plan, paths: list[str], shape: tuple[int, int]):
    """The chief's held-out instances in original units, block by block (deterministic order)."""
    from trainer.training import pipeline

    ds = pipeline.read_instances(plan, paths, shape, pipeline.VALIDATION, deterministic=True)
    yield from iterators.numpy_blocks(ds)


# The chief's held-out windows are read once and kept in memory for every pass over them (the challenger's, the
# baselines', each champion's) when they take at most this many bytes; a larger share is read again for each pass.
HELD_OUT_CACHE_BYTES = 256 << 20


def _held_out_once(plan: Plan, paths: list[str], shape: tuple[int, int]) -> list | None:
    """The chief's held-out windows as a list of blocks, read in one pass, when they fit ``HELD_OUT_CACHE_BYTES``
    (float32 in original units: ``val_counts[0] x T x F x 4`` bytes); None when they do not."""
    if plan.val_counts[0] * int(shape[0]) * int(shape[1]) * 4 > HELD_OUT_CACHE_BYTES:
        return None
    return [block for block in _held_out(plan, paths, shape) if len(block)]


def _training(plan: Plan, paths: list[str], shape: tuple[int, int]):
    """The chief's training instances in original units, block by block (the baseline's sample)."""
    from trainer.training import pipeline

    ds = pipeline.read_instances(plan, paths, shape, pipeline.TRAIN, deterministic=True)
    yield from iterators.numpy_blocks(ds)


def models_root(cfg: TrainerConfig) -> str:
    return cfg.models or champion_mod.models_root(cfg.job_dir)


def conclude(cfg: TrainerConfig, job: JobDir, metrics, model, plan: Plan, paths: list[str], inputs: Inputs,
             mean, std, storage: Storage) -> dict[str, Any]:
    started = time.monotonic()
    run = str(metrics.doc.get("job") or job.uri.rstrip("/").rsplit("/", 1)[-1])
    model_uri = job.path(MODEL)
    shape = tuple(inputs.shape)
    with stopwatch.span(LOAD):
        if isinstance(model, (str, os.PathLike)):  # the chief's saved copy: see below
            challenger = scoring.Scorer.load(storage, str(model))
            challenger.uri = model_uri
        else:
            challenger = scoring.Scorer.from_model(model, mean, std, shape, model_uri)  # type: ignore[arg-type]
        # Every candidate is measured in this job's error_scale (landfall.core.scoring), as train.save_model serves it.
        challenger = challenger.measured_in(inputs.error_scale() if mean is not None else None)
    datasets = inputs.datasets
    # The baselines (trainer.judging.baselines: the mean window, PCA at the model's code size, the nearest neighbour),
    # fitted in one pass over the chief's training share, only for a job that can be judged; their errors are taken in
    # the same pass over the held-out instances as the challenger's.
    with stopwatch.span(BASELINES):
        panel = (baselines.Panel.fit(_training(plan, paths, shape), plan.train_counts[0], mean, std, shape,
                                     cfg.units[-1], challenger.scale) if len(datasets) == 1 else None)
    tally = baselines.Tally(panel) if panel is not None else None
    with stopwatch.span(READ_HELD_OUT):  # once, for every pass below (None: too large to keep, read per pass)
        held = _held_out_once(plan, paths, shape)

    def held_out():
        return iter(held) if held is not None else _held_out(plan, paths, shape)

    rows = scoring.Histogram()  # the challenger's row errors: its row threshold
    if held is not None:
        with stopwatch.span(HELD_OUT):
            errors = challenger.errors_of(held, rows)
        if tally is not None:
            with stopwatch.span(BASELINES_HELD_OUT):
                for block in held:
                    tally.add(block)
    else:
        def tallied():
            for block in held_out():
                if tally is not None:
                    tally.add(block)
                yield block

        with stopwatch.span(HELD_OUT):  # one pass: the challenger's errors and the baselines' together
            errors = challenger.errors_of(tallied(), rows)  # type: ignore[arg-type]
    evaluation: dict[str, Any] = {"metric": challenger.metric, "instances": len(errors),
                                  "split": f"held-out share of worker 0 of {plan.num_workers}"}
    if not len(errors) or len(datasets) != 1:
        why = "no held-out instance" if not len(errors) else f"trained on {len(datasets)} datasets"
        log.warning(f"not evaluated: {why}", extra={"job": run, "fields": {"datasets": datasets}})
        return {"verdict": "not_evaluated", "challenger_loss": None, "champion_loss": None, "champion": None,
                "champion_run": None, "threshold": None, "baseline_loss": None, "skill": None,
                "min_skill": cfg.min_skill, "evaluation": {**evaluation, "reason": why}}
    loss = float(errors.mean())
    with stopwatch.span(THRESHOLD):
        threshold = scoring.threshold_doc(errors, cfg.threshold_quantile, challenger.metric, rows)
        job.write_json(f"{MODEL}/{champion_mod.THRESHOLD}", threshold)
    dataset = datasets[0]
    assert panel is not None and tally is not None  # one dataset
    held_losses = tally.losses()
    baseline_loss = held_losses[baselines.MEAN_WINDOW]
    assert baseline_loss is not None
    skill = floor.skill(loss, baseline_loss)
    evaluation["baseline"] = {"name": floor.NAME, "description": floor.DESCRIPTION,
                              "training_instances": panel.mean_window.count}
    compared = baselines.report(panel, held_losses, loss)
    gates = {"baseline_loss": baseline_loss, "skill": skill, "min_skill": cfg.min_skill, "baselines": compared,
             "min_skill_over": cfg.skill_margins(), "beaten_by": baselines.beaten_by(compared)}
    # The labelled check (trainer.judging.labelled_check): the spec's labelled set, scored by the challenger and each
    # champion.
    with stopwatch.span(LABELLED):
        labelled = _labelled(cfg, storage, run, dataset, challenger, threshold["value"], panel)
    cache_dir = tempfile.mkdtemp(prefix="landfall-champion-")
    refusal = (_refusal(cfg, skill) or _baseline_refusal(cfg, compared) or _labelled_refusal(cfg, labelled)
               or _baseline_ap_refusal(cfg, labelled))
    if cfg.select == "detection":  # the candidate that detects best (trainer.judging.selection): model or baseline
        return _by_detection(cfg, job, storage, run, dataset, plan, challenger, panel, tally, held_out, held,
                             labelled, refusal, started, cache_dir, {
                                 "challenger_loss": loss, **gates, "threshold": threshold,
                                 "evaluation": {**evaluation, "tolerance": cfg.promote_tolerance}})
    champions = ChampionScores(storage, cache_dir, held_out, run, dataset,
                               labelled_set=labelled["set"] if labelled is not None else None, scale=challenger.scale)
    if refusal is not None:  # below the floor: nothing is promoted; the champion is still scored, for the record
        verdict, why = refusal
        current, _ = champion_mod.read(storage, models_root(cfg), dataset)
        try:
            champion_loss = champions.score(current) if current is not None else None
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
        fields = {"verdict": verdict, "challenger_loss": loss, "champion_loss": champion_loss, **gates,
                  "champion": current.model if current else None, "champion_run": current.run if current else None,
                  "threshold": threshold, "labelled": _labelled_fields(labelled, champions),
                  "evaluation": {**evaluation, "reason": why, "tolerance": cfg.promote_tolerance,
                                 "wall_s": round(time.monotonic() - started, 3)}}
        log.warning(f"verdict: {verdict}: {why}", extra={"job": run, "dataset": dataset, "fields": {
            k: fields[k] for k in ("verdict", "challenger_loss", "baseline_loss", "skill", "champion_run")}})
        return fields
    try:
        with stopwatch.span(PROMOTE):
            outcome, champion_loss = champion_mod.promote_evaluated(
                storage, models_root(cfg), dataset, run=run, model=model_uri, loss=loss, evaluate=champions.score,
                tolerance=cfg.promote_tolerance, files=model_files.of_model(storage, model_uri),
                evaluation={"instances": len(errors), "metric": challenger.metric, "threshold": threshold["value"],
                            "quantiles": threshold["quantiles"], **gates})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    verdict = "promoted" if outcome.promoted else "kept_champion"
    current = outcome.champion
    fields = {
        "verdict": verdict,
        "challenger_loss": loss,
        "champion_loss": champion_loss,
        **gates,
        "champion": current.model if current else None,
        "champion_run": current.run if current else None,
        "threshold": threshold,
        "labelled": _labelled_fields(labelled, champions),
        "evaluation": {**evaluation, "tolerance": cfg.promote_tolerance,
                       "wall_s": round(time.monotonic() - started, 3)},
    }
    log.info(f"verdict: {verdict}", extra={"job": run, "dataset": dataset, "fields": {
        k: fields[k] for k in ("verdict", "challenger_loss", "champion_loss", "skill", "champion_run")}})
    if verdict == "promoted" and gates["beaten_by"]:  # loud: a baseline outside the gate reconstructs better
        log.warning(f"verdict: promoted, but beaten by {', '.join(gates['beaten_by'])} on the same held-out windows "
                    f"(not in the dataset's gate: verdict.min_skill_over)",
                    extra={"job": run, "dataset": dataset, "fields": {
                        "beaten_by": gates["beaten_by"],
                        "skill_over": {n: v.get("skill") for n, v in compared.items()}}})
    return fields


def _refusal(cfg: TrainerConfig, skill: float | None) -> tuple[str, str] | None:
    """The absolute gates a challenger must pass before it is compared with the champion: ``(verdict, why)``
    for the first it fails, else None."""
    if skill is None:
        return "no_skill", ("the baseline (the training set's mean window) reconstructs the held-out instances "
                            "exactly: there is nothing for a model to learn")
    if skill < cfg.min_skill:
        return "no_skill", (f"skill {skill:.3f} over the baseline (the training set's mean window) is below "
                            f"min_skill {cfg.min_skill:g}: the model did not learn enough to be promoted")
    return None


def _baseline_refusal(cfg: TrainerConfig, compared: dict[str, dict]) -> tuple[str, str] | None:
    """The detectors promotion must beat (``--min-skill-over``): ``no_skill`` naming the first one the challenger does
    not beat by its margin (a skill that cannot be computed, an exact baseline, is not a pass)."""
    for name, margin in cfg.skill_margins().items():
        found = compared.get(name) or {}
        value = found.get("skill")
        if value is None:
            return "no_skill", (f"the {name} baseline could not be compared (loss {found.get('loss')}): "
                                f"min_skill_over {name}={margin:g} cannot be checked, so nothing is promoted")
        if value < margin:
            return "no_skill", (f"skill {value:.3f} over the {name} baseline ({found.get('description')}) is below "
                                f"min_skill_over {name}={margin:g}: {name} reconstructs the held-out windows "
                                f"{'better' if value < 0 else 'nearly as well'} (loss {found['loss']:.6g} against the "
                                f"model's {(1.0 - value) * found['loss']:.6g}), so the model is not promoted")
    return None


def _labelled(cfg: TrainerConfig, storage: Storage, run: str, dataset: str, challenger: scoring.Scorer,
              threshold: float, panel: baselines.Panel | None = None) -> dict[str, Any] | None:
    """The labelled set (``--labelled``) and the challenger's figures on it; None without one. A set that cannot be
    read (gone, or not what its manifest says) is recorded with its ``error``: a gate on it then fails closed."""
    if not cfg.labelled:
        return None
    out: dict[str, Any] = {"uri": cfg.labelled, "set": None, "error": None, "challenger": None,
                           "min_average_precision": cfg.min_average_precision}
    try:
        out["set"] = labelled_check.load(storage, cfg.labelled, cfg.timesteps)
    except TemporaryError:
        raise
    except Exception as exc:  # NotFound, Invalid: a permanent problem of the set, said in metrics.json
        out["error"] = f"{type(exc).__name__}: {exc}"
        log.warning(f"labelled set unreadable: {exc}", extra={"job": run, "dataset": dataset,
                                                               "fields": {"labelled": cfg.labelled}})
        return out
    out["challenger"] = labelled_figures(challenger, out["set"], threshold, run, "challenger")
    if panel is not None:  # the detectors to beat, on the same set (trainer.judging.baselines): AP and VUS-PR
        errs = panel.errors(out["set"].instances)
        buffer = int(out["set"].instances.shape[1])
        out["baselines"] = {name: labelled_check.ranking(out["set"].labels, e, buffer) for name, e in errs.items()}
        mine = (out["challenger"] or {}).get("average_precision")
        out["beaten_by"] = sorted(n for n, f in out["baselines"].items()
                                  if mine is None or f["average_precision"] > mine)  # detects better on the labels
    return out


def _labelled_refusal(cfg: TrainerConfig, labelled: dict[str, Any] | None) -> tuple[str, str] | None:
    """The labelled check's gate (spec ``verdict.min_average_precision``), failing closed when it cannot be checked."""
    if cfg.min_average_precision is None or labelled is None:
        return None
    found = labelled["challenger"]
    if found is None:
        return "low_average_precision", (f"the labelled set {labelled['uri']} could not be scored "
                                         f"({labelled['error'] or 'see the log'}): min_average_precision "
                                         f"{cfg.min_average_precision:g} cannot be checked, so nothing is promoted")
    if found["average_precision"] < cfg.min_average_precision:
        return "low_average_precision", (
            f"average precision {found['average_precision']:.3f} on the labelled set ({labelled['set'].count} "
            f"instances, {labelled['set'].positives} anomalous) is below min_average_precision "
            f"{cfg.min_average_precision:g}")
    return None


def _baseline_ap_refusal(cfg: TrainerConfig, labelled: dict[str, Any] | None) -> tuple[str, str] | None:
    """``--min-average-precision-over-baselines M`` (spec ``verdict.min_average_precision_over_baselines``): the
    challenger's average precision on the labelled set must reach the best baseline's + ``M``."""
    if cfg.min_average_precision_over_baselines is None or labelled is None:
        return None
    found, others = labelled.get("challenger"), labelled.get("baselines") or {}
    if found is None or not others:
        return "low_average_precision", (f"the labelled set {labelled['uri']} could not be scored by the challenger "
                                         f"and the baselines: min_average_precision_over_baselines cannot be checked")
    best = max(others, key=lambda n: others[n]["average_precision"])
    need = others[best]["average_precision"] + cfg.min_average_precision_over_baselines
    if found["average_precision"] < need:
        return "low_average_precision", (
            f"average precision {found['average_precision']:.3f} on the labelled set is below the best baseline's "
            f"({best}: {others[best]['average_precision']:.3f}) + {cfg.min_average_precision_over_baselines:g}")
    return None


def _labelled_fields(labelled: dict[str, Any] | None, champions: ChampionScores) -> dict[str, Any] | None:
    """``metrics.json``'s ``labelled``: the challenger's figures and those of the champion it was compared with (the
    last one evaluated), null when unknown (no champion, or one that could not score the set)."""
    if labelled is None:
        return None
    compared = champions.last()
    found = labelled["set"]
    return {"uri": labelled["uri"], "instances": found.count if found else None,
            "positives": found.positives if found else None, "error": labelled["error"],
            "windows": found.manifest.get("windows") if found else None,  # a labelled recording: how it was cut
            "min_average_precision": labelled["min_average_precision"],
            "challenger": labelled["challenger"],
            "champion": champions.labelled.get(compared) if compared else None,
            "baselines": labelled.get("baselines"), "beaten_by": labelled.get("beaten_by")}


def _surrogate_blocks(held: list | None, held_out) -> list:
    """The held-out windows the surrogate set is built from: the cached blocks, else a bounded read of them."""
    if held is not None:
        return held
    out, n = [], 0
    for block in held_out():
        out.append(block)
        n += len(block)
        if n >= 4 * surrogate.MAX_WINDOWS:
            break
    return out


def _by_detection(cfg: TrainerConfig, job: JobDir, storage: Storage, run: str, dataset: str, plan: Plan,
                  challenger: scoring.Scorer, panel: baselines.Panel, tally: baselines.Tally, held_out, held,
                  labelled: dict[str, Any] | None, model_refusal: tuple[str, str] | None, started: float,
                  cache_dir: str, recorded: dict[str, Any]) -> dict[str, Any]:
    """``--select detection`` (``trainer.judging.selection``): the candidates scored on the surrogate set (and the
    labelled set, when there is one), the best that may be promoted compared with the champion on the same sets."""
    model_uri = job.path(MODEL)
    with stopwatch.span(SURROGATE):
        sset = surrogate.build(_surrogate_blocks(held, held_out), panel.std,
                               surrogate.seed_of(cfg.seed, (arrival_key(s) for s in plan.shards)))
        assert sset is not None  # the verdict has held-out windows here
        errs = {selection.MODEL: challenger.window_scores(sset.instances), **panel.window_scores(sset.instances)}
        figures = {name: sset.figures(e) for name, e in errs.items()}
    use_labels = labelled is not None and labelled.get("set") is not None
    for name, found in figures.items():
        lab = ((labelled or {}).get("challenger") if name == selection.MODEL
               else ((labelled or {}).get("baselines") or {}).get(name)) if use_labels else None
        found["labelled_average_precision"] = (lab or {}).get("average_precision")
    basis = selection.basis(use_labels, cfg.combine)
    key = selection.KEYS[basis]

    def refusal(name: str) -> str | None:
        if name == selection.MODEL:
            return model_refusal[1] if model_refusal is not None else None
        found = figures[name].get("labelled_average_precision")
        if cfg.min_average_precision is not None and (found is None or found < cfg.min_average_precision):
            return f"average precision {found} on the labelled set is below {cfg.min_average_precision:g}"
        return None

    choice = selection.choose({n: f.get(key) for n, f in figures.items()}, basis, refusal, cfg.model_margin)
    detection = selection.summary(choice, figures, sset.describe(), cfg.promote_margin, cfg.model_margin)
    current, _ = champion_mod.read(storage, models_root(cfg), dataset)
    champions = ChampionScores(storage, cache_dir, held_out, run, dataset,
                               labelled_set=labelled["set"] if use_labels else None,  # type: ignore[index]
                               surrogate_set=sset, scale=challenger.scale)

    def score_champion(champion: champion_mod.Champion) -> float | None:
        """1 - the champion's score (a loss for the promotion rule); None: it cannot score, so it is replaced."""
        champions.score(champion)
        found = champions.surrogate.get(champion.model)
        if found is None:
            return None
        found = {**found, "labelled_average_precision": (champions.labelled.get(champion.model) or {}).get(
            "average_precision") if use_labels else None}
        detection["champion"] = {"run": champion.run, "model": champion.model, **found}
        if not selection.comparable(choice, champion.detector):
            detection["champion"]["replaced_by_rule"] = choice.basis  # not what the rule serves: replaced
            return None
        value = found.get(key)
        return None if value is None else 1.0 - float(value)

    def fields(verdict: str, champion: champion_mod.Champion | None, why: str | None = None) -> dict[str, Any]:
        compared = champion.model if champion is not None else None
        evaluation = {**recorded["evaluation"], "wall_s": round(time.monotonic() - started, 3)}
        if why:
            evaluation["reason"] = why
        return {"verdict": verdict, **recorded,
                "champion_loss": champions.losses.get(compared) if compared else None,
                "champion": compared, "champion_run": champion.run if champion else None,
                "labelled": _labelled_fields(labelled, champions), "evaluation": evaluation,
                "detection": detection}

    try:
        if choice.chosen is None:  # every candidate failed a gate: the model's verdict says why
            verdict, why = model_refusal or ("no_skill", choice.why())
            if current is not None:
                score_champion(current)
            log.warning(f"verdict: {verdict}: {why}", extra={"job": run, "dataset": dataset})
            return fields(verdict, current, why)
        if choice.chosen != selection.MODEL:  # a baseline detects best: saved as a servable detector
            with stopwatch.span(EXPORT):
                uri, threshold, files = _export(cfg, job, panel, tally, choice.chosen)
        else:
            uri, threshold, files = model_uri, recorded["threshold"], model_files.of_model(storage, model_uri)
        detection.update(detector=choice.chosen, model=uri, threshold=threshold["value"])
        margin = cfg.promote_margin
        with stopwatch.span(PROMOTE):
            outcome, _ = champion_mod.promote_evaluated(
                storage, models_root(cfg), dataset, run=run, model=uri, loss=1.0 - float(choice.score or 0.0),
                evaluate=score_champion, metric="detection_loss", files=files,
                better=lambda mine, theirs: theirs is None or mine <= theirs - margin,
                evaluation={"instances": recorded["evaluation"]["instances"], "metric": choice.basis,
                            "detector": choice.chosen, "kind": baselines.DESCRIPTIONS.get(
                                choice.chosen, "the model the job trained"),
                            "unit": panel.unit(choice.chosen) or cfg.combine, "score": choice.score,
                            "threshold": threshold["value"], "quantiles": threshold["quantiles"],
                            "why": choice.why()})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    verdict = "promoted" if outcome.promoted else "kept_champion"
    out = fields(verdict, outcome.champion)
    log.info(f"verdict: {verdict}: {choice.why()}", extra={"job": run, "dataset": dataset, "fields": {
        "verdict": verdict, "detector": choice.chosen, "score": choice.score, "basis": choice.basis,
        "champion_run": out["champion_run"]}})
    return out


def _export(cfg: TrainerConfig, job: JobDir, panel: baselines.Panel, tally: baselines.Tally,
            name: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    """Baseline ``name`` saved as ``runs/<job>/detectors/<name>`` (``trainer.judging.detectors``) with its own
    threshold, from its errors on the held-out windows; returns its URI, threshold and files' digests (``model_files``,
    taken from the local folder it uploads, so nothing is read back)."""
    errors = np.concatenate(tally.parts[name])
    metric = scoring.SCORE if baselines.scores(panel.kinds.get(name)) else scoring.metric_of(panel.scale)
    threshold = scoring.threshold_doc(errors, cfg.threshold_quantile, metric, tally.rows.get(name))
    local = tempfile.mkdtemp(prefix=f"landfall-{name}-")
    try:
        folder = detectors.save(panel, name, os.path.join(local, name))
        (folder / champion_mod.THRESHOLD).write_text(json.dumps(threshold, indent=2))
        files = model_files.of_folder(folder)
        job.mirror_up(folder, detectors.folder(name), last=("saved_model.pb",))
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return job.path(detectors.folder(name)), threshold, files


def publish_result(cfg: TrainerConfig, job: JobDir, doc: dict[str, Any], storage: Storage,
                   pubsub: PubSub | None = None) -> bool:
    """Announces the finished run once (``landfall.core.artifacts.results.announce``); True if this call published.

    ``doc`` is the final ``metrics.json`` (status ``succeeded`` or ``failed``). Only a ``gs://`` job dir is
    announced (a workstation run into a local folder is not a job of the system). A failure the TFJob will
    retry (``retryable``) is not the end of the job: nothing is sent (the next attempt, or the reconciler
    once the TFJob ends Failed, announces it). Never raises: the result marker stays
    incomplete or absent and the reconciler sends it once the TFJob has finished."""
    status = doc.get("status")
    if not cfg.results_topic or status not in results.STATUSES or not is_gs(job.uri):
        return False  # a workstation run into a local folder is no job of the system: nobody listens
    if status == "failed" and doc.get("retryable"):
        return False
    run = str(doc.get("job") or job.uri.rstrip("/").rsplit("/", 1)[-1])
    try:
        message = results.from_metrics(doc, job=run, dataset=str(doc.get("dataset") or ""), status=status,
                                       inputs_uri=inputs_uri(cfg.manifests), storage=storage, published_by="chief")
        return results.announce(storage, pubsub or PubSub(cfg.project), cfg.results_topic, job.uri, message)
    except Exception as exc:  # the run is over either way: the reconciler is the backstop
        log.warning(f"result not published ({exc}); the reconciler sends it once the job has finished",
                    extra={"job": run, "fields": {"topic": cfg.results_topic}})
        return False
