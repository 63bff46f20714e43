"""The champion's view of new data: before a job trains, its dataset's champion scores the arrivals new to it.

``score`` (the chief, after staging, before TensorFlow's strategy exists) answers "did my new data contain
anomalies?" for every job, before the data is trained on:

- **New** arrivals: those in this job's inputs that were not in the inputs of the champion's job. The champion's
  job is ``champion.run``; its ``runs/<job>/inputs.json`` (manifests, and a snapshot less its ``skip``, as
  ``trainer.training.inputs.load_manifests`` resolves them) lists what it trained on; an arrival is known by its
  manifest URI, which a compacted snapshot keeps (``ShardRef.manifest``), so compaction between the two jobs changes
  nothing. A champion job started by hand without an ``inputs.json`` is read from its ``metrics.json``
  ``manifests``. Everything the champion was trained on is old; everything else (arrivals since, and any
  retracted and re-admitted) is new.
- **Flagged**: an instance whose reconstruction error under the champion (``landfall.core.scoring.Scorer``, the
  champion's own normalisation, MSE in original units) exceeds the champion's threshold (its ``threshold.json``
  ``value``, the quantile its verdict chose).
- **Scores that already exist are reused** (``reuse``): the scorer (``landfall.detect``) scores every committed
  arrival with the champion of the moment (``landfall.core.artifacts.detections``:
  ``scores/<dataset>/<arrival>/<champion
  job>/``). A new arrival whose summary there is by this champion's job, of ``kind`` ``instances``, at the same
  threshold as the champion's ``threshold.json`` ``value`` and of the same ``count`` as the arrival's manifest takes
  its flags from that summary's scores (Parquet: ``index``, ``error``, ``anomaly``; ``index`` is the record's position
  in the arrival, in the manifest's shard order: the view's own (arrival, index in the arrival)) instead of being
  scored again; the counts and flagged indices are the ones scoring would give. A missing, corrupt or unreadable
  summary or Parquet, or one that disagrees (another threshold or count, an index that is not ``0..count-1``, an
  ``anomaly`` that is not ``error > threshold``), is not reused: that arrival is scored. **Series arrivals are always
  scored**: the scorer's results of a series are per row of the series (scores located from overlapping windows),
  not per window record, so they do not give the flags of the windows the view counts. When every new arrival is
  reused (or none is new), the champion's threshold is read from its ``threshold.json`` alone: no child process is
  spawned and the model is never loaded.
- **One inference pass** for the rest, on data the job staged anyway: each new shard's records are read from the
  staged file when the chief holds it, in file order (one pipeline per shard piece, so every error is attributed to
  its (arrival, index in the arrival)). On several workers the chief also stages the new shards other workers hold:
  only new data, usually a small part of the job.
- **Workers in step.** The chief alone scores, before ``trainer.train`` creates MultiWorkerMirroredStrategy:
  no collective exists yet, and the other workers wait at the strategy's cluster barrier, as they already wait
  for a chief that stages more slowly. Nothing is all-reduced. The scoring runs in a child process (``in_child``,
  spawned): the strategy must configure TensorFlow's collectives before the process runs any TensorFlow op, so
  the chief's own process must not load the champion first. The child costs one interpreter and TensorFlow
  import, counted in ``wall_s``.
- **No champion, no zero.** A job whose dataset has no champion (or whose champion cannot score: no threshold,
  another instance shape, unreadable) records ``flagged: null`` and the ``reason``, never 0.
- **Exact restarts.** The view is written into ``metrics.json`` (``champion_view``) once; a restarted job reuses
  the record of its earlier attempt instead of scoring again (the champion may have changed meanwhile), so every
  attempt records the same numbers.

``training.exclude_flagged`` (``exclude``): the chief publishes the flagged indices (``publish``: the job dir's
``champion_view.json``), the other workers poll for them (``wait_flagged``: no collective exists yet), and every
worker plans again with them in neither split (``trainer.training.inputs.plan_inputs(excluded=...)``), so the shares
stay exact; the tf.data pipeline filters on each record's (arrival, index in the arrival)
(``trainer.training.pipeline.read_blocks``, ``trainer.training.windows.window_starts``).

Recorded as ``metrics.json`` ``champion_view``: ``{champion_run, champion_model, threshold, threshold_quantile,
new (the definition above), instances, flagged, fraction, arrival_count, arrivals: [{arrival, manifest, instances,
flagged, fraction, reused}] (the first ``ARRIVALS_LISTED``), reused_arrivals, reused_instances (of those, taken from
the scorer's results), wall_s, reason}``. The result message carries a bounded copy
(``landfall.core.artifacts.results.champion_view_summary``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from landfall.core import logs
from landfall.core.artifacts import champion as champion_mod
from landfall.core.artifacts import detections
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import utc_now
from landfall.core.errors import Invalid, NotFound, TemporaryError
from landfall.core.services.storage import Storage, join
from trainer.config import TrainerConfig
from trainer.jobdir import METRICS, JobDir
from trainer.judging import detectors
from trainer.training import inputs as inputs_mod

log = logs.get("trainer.judging.champion_view")

FIELD = "champion_view"
ARRIVALS_LISTED = 1000  # metrics.json is rewritten every epoch: it must not grow with the dataset's history
REUSE_WORKERS = 16  # summaries and scores read at once (latency-bound: one small object or two per arrival)
NEW = "arrivals in this job's inputs that were not in the inputs of the champion's job"


@dataclasses.dataclass
class View:
    """What ``score`` found: the record, and the flagged instances as ``{manifest: sorted indices in the arrival}``
    (for ``training.exclude_flagged``)."""

    record: dict[str, Any]
    flagged: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    reused: bool = False  # the record of an earlier attempt of this job


@dataclasses.dataclass
class Reused:
    """What ``reuse`` took from the scorer's results: the champion's threshold as its ``threshold.json`` says (None when
    it cannot be read: nothing is reused then), and per reused manifest its ``arrivals`` entry and flagged indices."""

    threshold: float | None = None
    quantile: Any = None
    per: dict[str, dict] = dataclasses.field(default_factory=dict)
    flagged: dict[str, list[int]] = dataclasses.field(default_factory=dict)


def none(reason: str, **fields: Any) -> dict[str, Any]:
    """The record of a job the champion could not score: nulls and why, never zeros."""
    return {"champion_run": None, "champion_model": None, "threshold": None, "threshold_quantile": None,
            "new": NEW, "instances": None, "flagged": None, "fraction": None, "arrival_count": None,
            "arrivals": None, "wall_s": None, **fields, "reason": reason}


def previous(job: JobDir) -> dict[str, Any] | None:
    """The record an earlier attempt of this job wrote, if any."""
    doc = job.read_json(METRICS) or {}
    found = doc.get(FIELD)
    return found if isinstance(found, dict) else None


def in_child(cfg: TrainerConfig, storage: Storage, job: JobDir, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan,
             paths: list[Path], work: Path, run: str) -> View:
    """``safely`` in a spawned child process (see the module docstring), the chief's process left without
    TensorFlow ops; its ``wall_s`` counts the child's start. What needs no TensorFlow (``precheck``: no champion, a
    restart's record; ``reuse``: the arrivals the scorer already scored) is decided here, so a job with nothing to
    score starts no child."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    started = time.monotonic()
    try:
        found = precheck(cfg, storage, job, inputs, plan, run)
        if isinstance(found, View):
            return found
        current, new = found
        reused = reuse(storage, inputs, plan, current, new)
        if reused.threshold is not None and not _rest(plan, new, reused):  # nothing to score: no child, no model
            return _finish(job, current, plan, new, reused, {}, {}, reused.threshold, reused.quantile, started, run)
    except TemporaryError:
        raise
    except Exception as exc:
        log.warning(f"champion view: not scored: {type(exc).__name__}: {exc}", extra={"job": run})
        return View(none(f"scoring failed: {type(exc).__name__}: {exc}"))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        view = pool.submit(_child, cfg, inputs, plan, [str(p) for p in paths], str(work), run, reused).result()
    if view.record.get("wall_s") is not None and not view.reused:  # score_s: the champion's load and the pass
        view.record["score_s"] = view.record["wall_s"]
        view.record["wall_s"] = round(time.monotonic() - started, 3)
    return view


def _child(cfg: TrainerConfig, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan, paths: list[str], work: str,
           run: str, reused: Reused | None = None) -> View:
    logs.setup()
    storage = Storage()
    return safely(cfg, storage, JobDir(storage, cfg.job_dir), inputs, plan, [Path(p) for p in paths], Path(work),
                  run, reused)


def safely(cfg: TrainerConfig, storage: Storage, job: JobDir, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan,
           paths: list[Path], work: Path, run: str, reused: Reused | None = None) -> View:
    """``score``, where a failure to score is recorded (null, with the reason) rather than failing the job; only
    storage being unreachable (``TemporaryError``: the job is retried) leaves it."""
    try:
        return score(cfg, storage, job, inputs, plan, paths, work, run, reused)
    except TemporaryError:
        raise
    except Exception as exc:
        log.warning(f"champion view: not scored: {type(exc).__name__}: {exc}", extra={"job": run})
        return View(none(f"scoring failed: {type(exc).__name__}: {exc}"))


def champion_arrivals(storage: Storage, current: champion_mod.Champion, shape: tuple[int, int]) -> set[str] | None:
    """The manifests the champion's job trained on; None when they cannot be known."""
    job_dir = detectors.job_dir_of(current.model)
    uri = join(job_dir, inputs_mod.INPUTS_NAME)
    try:
        if storage.exists(uri):
            return {s.manifest for s in inputs_mod.load_manifests(storage, [uri], shape).shards}
    except (NotFound, Invalid) as exc:
        log.warning(f"cannot read the champion's inputs {uri}: {exc}")
    metrics = JobDir(storage, job_dir).read_json(METRICS) or {}
    listed = metrics.get("manifests")
    return {str(m) for m in listed} if isinstance(listed, list) and listed else None


def precheck(cfg: TrainerConfig, storage: Storage, job: JobDir, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan,
             run: str) -> View | tuple[champion_mod.Champion, list[int]]:
    """What needs no TensorFlow: an earlier attempt's record, or why there is nothing to score (a ``View``); else
    the champion and the indices of the plan's new shards."""
    earlier = previous(job)
    if earlier is not None:
        flagged = _read_flagged(job)
        if earlier.get("flagged") is None or flagged is not None:
            log.info("champion view: reusing the record of an earlier attempt", extra={"job": run})
            return View(earlier, flagged or {}, reused=True)
    datasets = inputs.datasets
    if len(datasets) != 1:
        return View(none(f"trained on {len(datasets)} datasets"))
    dataset = datasets[0]
    from trainer.judging.verdict import models_root

    try:
        current, _ = champion_mod.read(storage, models_root(cfg), dataset)
    except TemporaryError:
        raise
    except Exception as exc:
        return View(none(f"cannot read the champion of {dataset}: {exc}"))
    if current is None:
        return View(none(f"dataset {dataset} has no champion"))
    who = {"champion_run": current.run, "champion_model": current.model}
    if current.run == run:
        return View(none("the champion is this job itself", **who))
    seen = champion_arrivals(storage, current, tuple(inputs.shape))  # type: ignore[arg-type]
    if seen is None:
        return View(none(f"the inputs of the champion's job {current.run} cannot be read: no arrival is known new",
                         **who))
    return current, [i for i, s in enumerate(plan.shards) if s.manifest not in seen]


def score(cfg: TrainerConfig, storage: Storage, job: JobDir, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan,
          paths: list[Path], work: Path, run: str, reused: Reused | None = None) -> View:
    """The champion's view of this job's new arrivals (the chief, before the strategy exists). ``reused``: what
    ``reuse`` found already (``in_child`` looks before it spawns); else looked up here."""
    started = time.monotonic()
    found = precheck(cfg, storage, job, inputs, plan, run)
    if isinstance(found, View):
        return found
    current, new = found
    who = {"champion_run": current.run, "champion_model": current.model}
    if reused is None:
        reused = reuse(storage, inputs, plan, current, new)
    rest = _rest(plan, new, reused)
    if reused.threshold is not None and not rest:
        return _finish(job, current, plan, new, reused, {}, {}, reused.threshold, reused.quantile, started, run)
    from landfall.core import scoring

    cache = tempfile.mkdtemp(prefix="landfall-champion-view-")
    try:
        try:
            scorer = scoring.Scorer.load(storage, current.model, cache, current.files)
            threshold = scoring.threshold_of(scorer)
        except TemporaryError:
            raise
        except (NotFound, Invalid) as exc:
            return View(none(f"the champion {current.run} cannot score: {exc}", **who))
        if scorer.shape is not None and tuple(scorer.shape) != tuple(inputs.shape):
            return View(none(f"the champion {current.run} takes instances of {list(scorer.shape)}, this job's are "
                             f"{list(inputs.shape)}", **who))
        if reused.per and reused.threshold != threshold:  # the model's threshold is not the one reuse read
            reused, rest = Reused(), new
        per, flagged = score_shards(cfg, storage, plan, paths, work, rest, scorer, threshold,
                                     tuple(inputs.shape))  # type: ignore[arg-type]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return _finish(job, current, plan, new, reused, per, flagged, threshold, (scorer.threshold or {}).get("quantile"),
                   started, run)


def _rest(plan: inputs_mod.Plan, new: list[int], reused: Reused) -> list[int]:
    """The new shards whose arrival was not reused: those to score."""
    return [i for i in new if plan.shards[i].manifest not in reused.per]


def _finish(job: JobDir, current: champion_mod.Champion, plan: inputs_mod.Plan, new: list[int], reused: Reused,
            per: dict[str, dict], flagged: dict[str, list[int]], threshold: float, quantile: Any, started: float,
            run: str) -> View:
    """The record (arrivals in the plan's order, reused or scored), with the flagged indices written."""
    for entry in per.values():
        entry["reused"] = False
    per = {**per, **reused.per}
    flagged = {**flagged, **reused.flagged}
    arrivals = [per[m] for m in dict.fromkeys(plan.shards[i].manifest for i in new)]
    total = sum(a["instances"] for a in arrivals)
    hits = sum(a["flagged"] for a in arrivals)
    taken = [a for a in arrivals if a.get("reused")]
    record = {"champion_run": current.run, "champion_model": current.model, "threshold": threshold,
              "threshold_quantile": quantile, "new": NEW, "instances": total, "flagged": hits,
              "fraction": round(hits / total, 6) if total else None, "arrival_count": len(arrivals),
              "arrivals": arrivals[:ARRIVALS_LISTED], "reused_arrivals": len(taken),
              "reused_instances": sum(a["instances"] for a in taken), "wall_s": round(time.monotonic() - started, 3),
              "scored_at": utc_now(), "reason": None if arrivals else "no new arrival since the champion's job"}
    _write_flagged(job, flagged)
    log.info(f"champion view: {hits} of {total} new instances over the threshold of champion {current.run} "
             f"({record['reused_arrivals']} of {len(arrivals)} arrivals from the scorer's results)",
             extra={"job": run, "dataset": current.dataset, "fields": {k: record[k] for k in (
                 "champion_run", "threshold", "instances", "flagged", "arrival_count", "reused_arrivals",
                 "reused_instances", "wall_s")}})
    return View(record, flagged)


def reuse(storage: Storage, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan, current: champion_mod.Champion,
          new: list[int]) -> Reused:
    """The new instance arrivals whose scores by this champion already exist (``landfall.core.artifacts.detections``;
    module
    docstring), read without TensorFlow. Never raises: what cannot be reused is scored."""
    try:
        doc = json.loads(storage.read_bytes(join(current.model, champion_mod.THRESHOLD)))
        threshold = float(doc["value"])
    except Exception as exc:  # no threshold.json, or not one: the model's load decides (and says why)
        log.info(f"champion view: nothing reused: the champion's {champion_mod.THRESHOLD}: {type(exc).__name__}: "
                 f"{exc}")
        return Reused()
    found = Reused(threshold, doc.get("quantile"))
    pieces: dict[str, list[inputs_mod.ShardRef]] = {}
    for i in new:
        pieces.setdefault(plan.shards[i].manifest, []).append(plan.shards[i])
    counts = dict(zip(inputs.manifest_uris, (m.count for m in inputs.manifests), strict=True))
    wanted = [(m, refs) for m, refs in pieces.items()
              if m.startswith("gs://") and all(r.series is None and r.arrival for r in refs)]  # series: scored
    try:
        lay = Layout.load()
    except ValueError as exc:  # a malformed LANDFALL_*_PREFIX: the results cannot be found
        log.warning(f"champion view: nothing reused: {exc}")
        return found
    if not wanted:
        return found

    def one(item: tuple[str, list[inputs_mod.ShardRef]]) -> tuple[str, dict, list[int]] | None:
        manifest, refs = item
        try:
            return _reuse_arrival(storage, lay, current, threshold, manifest, refs,
                                  counts.get(manifest, sum(r.count for r in refs)))
        except Exception as exc:  # corrupt, unreadable, unreachable: scored instead, never the job's failure
            log.warning(f"champion view: the scorer's results of {manifest} are not reused: {type(exc).__name__}: "
                        f"{exc}")
            return None

    with ThreadPoolExecutor(min(REUSE_WORKERS, len(wanted))) as pool:
        for got in pool.map(one, wanted):
            if got is not None:
                manifest, entry, over = got
                found.per[manifest] = entry
                if over:
                    found.flagged[manifest] = over
    return found


def _reuse_arrival(storage: Storage, lay: Layout, current: champion_mod.Champion, threshold: float, manifest: str,
                   refs: list[inputs_mod.ShardRef], count: int) -> tuple[str, dict, list[int]] | None:
    """One arrival's entry and flagged indices from its summary by ``current`` (None: there is none that fits)."""
    import pyarrow.parquet as pq

    bucket, _ = layout.split_gs(manifest)
    summary = detections.read(storage, bucket, lay, current.dataset, refs[0].arrival, current.run)
    if summary is None:
        return None
    msg = summary.message
    if msg.get("kind") != "instances" or float(msg["threshold"]) != threshold or int(msg["count"]) != count:
        log.info(f"champion view: {summary.uri} does not fit ({msg.get('kind')}, threshold {msg.get('threshold')}, "
                 f"count {msg.get('count')}; the champion's threshold {threshold}, the manifest's count {count}): "
                 "scored")
        return None
    table = pq.read_table(io.BytesIO(storage.read_bytes(str(msg["scores"]))), columns=["index", "error", "anomaly"])
    index = table.column("index").to_numpy()
    errors = table.column("error").to_numpy().astype(np.float64)
    anomaly = np.asarray(table.column("anomaly").to_numpy(), dtype=bool)
    if len(index) != count or not np.array_equal(index, np.arange(count)):
        raise Invalid(f"{msg['scores']}: {len(index)} rows whose index is not 0..{count - 1}")
    flags = errors > threshold
    if not np.array_equal(flags, anomaly):
        raise Invalid(f"{msg['scores']}: its anomaly column is not error > {threshold}")
    taken = np.concatenate([np.arange(r.arrival_start, r.arrival_start + r.count) for r in refs])
    if len(taken) and (taken.min() < 0 or taken.max() >= count):
        raise Invalid(f"the job reads records of {manifest} beyond the {count} its summary scored")
    over = taken[flags[taken]]
    entry = {"arrival": refs[0].arrival or None, "manifest": manifest, "instances": len(taken),
             "flagged": len(over), "fraction": round(len(over) / len(taken), 6) if len(taken) else None,
             "reused": True}
    return manifest, entry, sorted(over.tolist())


def score_shards(cfg: TrainerConfig, storage: Storage, plan: inputs_mod.Plan, paths: list[Path], work: Path,
                 new: list[int], scorer: Any, threshold: float, shape: tuple[int, int]
                 ) -> tuple[dict[str, dict], dict[str, list[int]]]:
    """The scoring pass of ``score``: the plan's shards ``new`` (staged here when another worker's) scored by
    ``scorer`` against ``threshold``. Per new arrival ``{arrival, manifest, instances, flagged, fraction}``, and the
    flagged indices (in their arrival)."""
    from trainer.training import pipeline

    staged = {plan.shards[i].uri: p for i, p in zip(plan.mine, paths, strict=True)}
    missing = sorted({plan.shards[i].uri: i for i in new if plan.shards[i].uri not in staged}.values())
    if missing:  # another worker's share of the new data: only new shards are staged here
        more = inputs_mod.stage(storage, dataclasses.replace(plan, mine=tuple(missing)), work / "champion-view",
                                cfg.download_workers, cfg.verify_crc32c)
        staged.update({plan.shards[i].uri: p for i, p in zip(missing, more, strict=True)})
    per: dict[str, dict] = {}
    flagged: dict[str, list[int]] = {}
    for i in new:
        shard = plan.shards[i]
        # One piece, every record a training record, one worker: read in file order (index = arrival_start + k).
        alone = inputs_mod.Inputs((), (), (shard,), shape)
        sub = inputs_mod.plan_inputs(alone, 1, 0, 1, 0.0, plan.split.seed, plan.split.mode)
        blocks = pipeline.read_instances(sub, [str(staged[shard.uri])], alone.shape, pipeline.TRAIN, deterministic=True)
        errors = scorer.errors_of(blocks.as_numpy_iterator())
        if len(errors) != shard.count:
            raise Invalid(f"champion view: {len(errors)} instances read of {shard.uri}, its manifest says "
                          f"{shard.count}")
        over = np.flatnonzero(errors > threshold)
        entry = per.setdefault(shard.manifest, {"arrival": shard.arrival or None, "manifest": shard.manifest,
                                                "instances": 0, "flagged": 0, "fraction": None})
        entry["instances"] += len(errors)
        entry["flagged"] += len(over)
        entry["fraction"] = round(entry["flagged"] / entry["instances"], 6)
        if len(over):
            flagged.setdefault(shard.manifest, []).extend((over + shard.arrival_start).tolist())
    return per, {k: sorted(v) for k, v in flagged.items()}


FLAGGED = "champion_view.json"  # in the job dir: the flagged indices per new arrival (an attempt's restart reads it)
WAIT_S = 3600.0  # how long a worker waits for the chief's flagged indices (without --collective-timeout-s)


def publish(job: JobDir, view: View) -> None:
    """The chief's flagged indices in the job dir, for the other workers (``exclude_flagged``) and a restart; also
    when nothing was scored (empty), so no worker waits for a file that never comes."""
    _write_flagged(job, view.flagged)


def wait_flagged(job: JobDir, timeout_s: float = 0.0, poll_s: float = 1.0) -> dict[str, list[int]]:
    """A worker's copy of the chief's flagged indices: polls the job dir (no collective: the strategy does not exist
    yet) until the chief wrote them. A restarted job finds its first attempt's at once."""
    deadline = time.monotonic() + (timeout_s or WAIT_S)
    while True:
        found = _read_flagged(job)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TemporaryError(f"the chief wrote no {FLAGGED} in {job.uri} within {timeout_s or WAIT_S:.0f} s")
        time.sleep(poll_s)


def exclude(cfg: TrainerConfig, storage: Storage, inputs: inputs_mod.Inputs, plan: inputs_mod.Plan,
            paths: list[Path], work: Path, flagged: dict[str, list[int]], cluster: Any, metrics: Any
            ) -> tuple[inputs_mod.Plan, list[Path]]:
    """``training.exclude_flagged``: the plan again with the flagged records in neither split (every worker computes
    the same plan from the same indices, so the shares stay exact and equal), and this worker's shards for it (the
    copies staged for the first plan reused). The chief records ``excluded`` (per arrival, and in total)."""
    flagged = {k: v for k, v in flagged.items() if v}
    if flagged:
        plan = inputs_mod.plan_inputs(inputs, cluster.num_workers, cluster.worker_index, cfg.batch_size_per_worker,
                                      cfg.validation_fraction, cfg.seed, plan.split.mode, excluded=flagged,
                                      min_steps=cfg.min_steps_per_epoch)
        paths = inputs_mod.stage(storage, plan, work / "shards", cfg.download_workers, cfg.verify_crc32c)
    if cluster.is_chief:
        record = metrics.doc.get(FIELD)
        if isinstance(record, dict):
            scored = record.get("flagged") is not None  # no champion: nothing known, so null, not 0
            record["exclude_flagged"] = True
            record["excluded"] = sum(len(v) for v in flagged.values()) if scored else None
            for entry in record.get("arrivals") or []:
                entry["excluded"] = len(flagged.get(entry.get("manifest"), ()))
        log.info(f"exclude_flagged: {sum(len(v) for v in flagged.values())} flagged instances left out of training "
                 "and the held-out set", extra={"fields": inputs_mod.steps_summary(plan)})
    return plan, paths


def _write_flagged(job: JobDir, flagged: dict[str, list[int]]) -> None:
    job.write_json(FLAGGED, {"schema": "landfall.champion_view/v1", "flagged": flagged})


def _read_flagged(job: JobDir) -> dict[str, list[int]] | None:
    doc = job.read_json(FLAGGED)
    if not isinstance(doc, dict) or not isinstance(doc.get("flagged"), dict):
        return None
    return {str(k): [int(i) for i in v] for k, v in doc["flagged"].items()}
