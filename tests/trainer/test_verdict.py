"""The verdict (``trainer.judging.verdict``): evaluation against the champion on the same held-out instances,
promotion with the generation guard, the threshold beside the model, and the result message.

Tiny models (GRU 8 -> 4, 8 timesteps x 3 features) saved as ``trainer.train.save_model`` saves them."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

from landfall.core.artifacts import champion, results
from landfall.core.errors import NotFound
from landfall.core.services.storage import Storage
from tests.trainer.helpers import make_array, write_dataset
from trainer.config import TrainerConfig
from trainer.jobdir import MODEL, JobDir
from trainer.task import Metrics
from trainer.training import inputs as inputs_mod

SHAPE = (8, 3)
UNITS = (8, 4)


def _save(model, local: Path, mean, std) -> None:
    """What ``trainer.train.save_model`` writes: a SavedModel with its serving signature + normalization.json."""
    import tensorflow as tf

    spec = tf.TensorSpec([None, *SHAPE], tf.float32, name="x")
    serve = tf.function(lambda x: {"reconstruction": model(x, training=False)}, input_signature=[spec])
    model.save(str(local), include_optimizer=False, save_traces=False, signatures={"serving_default": serve})
    (local / "normalization.json").write_text(json.dumps(
        {"shape": list(SHAPE), "dtype": "float32", "normalized": mean is not None, "mean": mean, "std": std}))


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """One dataset on local disk, its plan and staged shards, and two models: a trained one and an untrained one."""
    import tf_keras as keras

    from trainer.training.model import build_model

    root = tmp_path_factory.mktemp("verdict")
    storage = Storage()
    x = make_array(400, seed=3, shape=SHAPE)
    manifest = write_dataset(storage, str(root / "tfrecords" / "demo" / "a1"), x, shards=2)
    cfg = TrainerConfig(manifests=(manifest,), job_dir=str(root / "runs" / "job-x"), timesteps=SHAPE[0],
                        features=SHAPE[1], units=UNITS, batch_size_per_worker=32, validation_fraction=0.25,
                        dropout=0.0, results_topic="", select="loss")  # the loss rule; detection: its own tests
    inputs = inputs_mod.load_manifests(storage, cfg.manifests, cfg.shape)
    plan = inputs_mod.plan_inputs(inputs, 1, 0, 32, cfg.validation_fraction, cfg.seed)
    paths = [str(p) for p in inputs_mod.stage(storage, plan, root / "shards")]
    mean, std = inputs.feature_stats()
    keras.utils.set_random_seed(1)
    trained = build_model(*SHAPE, UNITS, 0.0, 1e-2)
    z = ((x - np.array(mean)) / np.array(std)).astype(np.float32)
    trained.fit(z, z, epochs=30, batch_size=64, verbose=0)
    untrained = build_model(*SHAPE, UNITS, 0.0, 1e-2)
    saved = {}
    for key, model in (("trained", trained), ("untrained", untrained)):
        saved[id(model)] = root / "saved" / key
        _save(model, saved[id(model)], mean, std)
    return {"saved": saved, "root": root, "storage": storage, "cfg": cfg, "inputs": inputs, "plan": plan,
            "paths": paths, "mean": mean, "std": std, "trained": trained, "untrained": untrained, "x": x}


def _split(s):
    """The setting's training and held-out instances, in original units (the verdict's view of the plan)."""
    from trainer.training import pipeline

    def read(split):
        ds = pipeline.read_instances(s["plan"], s["paths"], SHAPE, split, deterministic=True)
        return np.concatenate(list(ds.as_numpy_iterator()))

    return read(pipeline.TRAIN), read(pipeline.VALIDATION)


def _conclude(s, name: str, model, **cfg_overrides):
    import dataclasses

    from trainer.judging import verdict

    cfg = dataclasses.replace(s["cfg"], job_dir=str(s["root"] / "runs" / name), **cfg_overrides)
    job = JobDir(s["storage"], cfg.job_dir)
    shutil.copytree(s["saved"][id(model)], job.path(MODEL))  # as trainer.train.save_model leaves it
    metrics = Metrics(job, {"job": name, "dataset": "demo"}, enabled=True)
    fields = verdict.conclude(cfg, job, metrics, model, s["plan"], s["paths"], s["inputs"], s["mean"], s["std"],
                              s["storage"])
    return cfg, job, fields


def test_a_model_without_skill_is_never_promoted_a_better_one_is_a_worse_one_keeps_it_and_rollback_restores(setting):
    s = setting
    root = str(s["root"] / "models")
    # 1. the untrained model learned nothing: below the naive baseline's floor it is not promoted, not even as the
    #    dataset's first model; its threshold is still written beside it (scoring with it stays possible).
    _, job_u, u = _conclude(s, "job-u", s["untrained"])
    assert u["verdict"] == "no_skill" and u["champion_run"] is None and u["champion_loss"] is None
    assert u["skill"] < u["min_skill"] == 0.1
    assert u["skill"] == pytest.approx(1 - u["challenger_loss"] / u["baseline_loss"])
    assert "below min_skill 0.1" in u["evaluation"]["reason"]
    assert u["evaluation"]["baseline"]["name"] == "mean_window"
    assert u["evaluation"]["baseline"]["training_instances"] == sum(s["plan"].train_counts)
    assert champion.read(s["storage"], root, "demo")[0] is None
    assert Path(job_u.path(MODEL, "threshold.json")).exists()
    # The baseline is the training set's mean window, scored on the same held-out instances, every feature in the
    # job's error scale (each feature's standard deviation: none is constant here).
    x_train, x_val = _split(s)
    window = x_train.astype(np.float64).mean(axis=0)
    scale = np.asarray(s["inputs"].error_scale())
    np.testing.assert_allclose(scale, s["std"])
    assert u["evaluation"]["metric"] == "mse_standardised"
    assert u["baseline_loss"] == pytest.approx(float((((x_val - window) / scale) ** 2).mean()), rel=1e-6)
    # 2. the trained model beats the baseline: the dataset's first champion, with its threshold beside it.
    _, job_a, a = _conclude(s, "job-a", s["trained"])
    assert a["verdict"] == "promoted" and a["champion_loss"] is None and a["champion_run"] == "job-a"
    assert a["skill"] >= 0.1 and a["baseline_loss"] == u["baseline_loss"]
    threshold = json.loads(Path(job_a.path(MODEL, "threshold.json")).read_text())
    assert threshold["quantile"] == 0.99 and set(threshold["quantiles"]) == {"p50", "p95", "p99", "p99.9"}
    assert threshold["instances"] == a["evaluation"]["instances"] == sum(s["plan"].val_counts) > 50
    assert threshold["quantiles"]["p50"] <= threshold["value"] <= threshold["quantiles"]["p99.9"]
    # Beside it, the row threshold (``landfall score --combine row``): the same quantile of every held-out window
    # row's own error (a histogram's, to its bin), wider than the windows' since a window's error averages its rows'.
    from landfall.core import scoring

    own = scoring.Scorer.from_model(s["trained"], s["mean"], s["std"], SHAPE, scale=scale).row_errors(x_val)
    assert threshold["row"]["rows"] == own.size == threshold["instances"] * SHAPE[0]
    assert threshold["row"]["value"] == pytest.approx(float(np.quantile(own, 0.99)), rel=0.02)
    assert threshold["row"]["value"] > threshold["value"]
    np.testing.assert_allclose(own.mean(axis=1), scoring.Scorer.from_model(
        s["trained"], s["mean"], s["std"], SHAPE, scale=scale).errors(x_val), rtol=1e-12)
    current, _ = champion.read(s["storage"], root, "demo")
    assert current.evaluation["skill"] == a["skill"] and current.evaluation["baseline_loss"] == a["baseline_loss"]
    # 3. a model with no skill after it: the champion stays, and is still scored on the same instances, in this job's
    #    scale although its folder (saved as before error_scale existed) serves in original units.
    assert "error_scale" not in json.loads(Path(job_a.path(MODEL, "normalization.json")).read_text())
    _, _, n = _conclude(s, "job-n", s["untrained"])
    assert n["verdict"] == "no_skill" and n["champion_run"] == "job-a"
    assert n["champion_loss"] == pytest.approx(a["challenger_loss"], rel=1e-4)
    # 4. with the floor lowered, the champion comparison decides: the untrained model is worse, kept ...
    _, _, c = _conclude(s, "job-c", s["untrained"], min_skill=-1e9)
    assert c["verdict"] == "kept_champion" and c["champion_run"] == "job-a"
    assert c["challenger_loss"] > c["champion_loss"] == pytest.approx(a["challenger_loss"], rel=1e-4)
    # 5. ... unless the tolerance lets it through ...
    _, _, d = _conclude(s, "job-d", s["untrained"], promote_tolerance=1e6, min_skill=-1e9)
    assert d["verdict"] == "promoted" and d["champion_run"] == "job-d"
    # 6. ... and a better model (with the floor back) replaces that one, on the same instances, in the job's scale.
    _, _, b = _conclude(s, "job-b", s["trained"])
    assert b["verdict"] == "promoted" and b["champion_run"] == "job-b"
    assert b["champion_loss"] == pytest.approx(d["challenger_loss"], rel=1e-4) and b["challenger_loss"] < b[
        "champion_loss"]
    current, _ = champion.read(s["storage"], root, "demo")
    assert (current.run, current.seq, current.previous, current.reason) == ("job-b", 3, 2, "evaluated")
    assert [champion.read_history(s["storage"], root, "demo", n).run for n in (1, 2, 3)] == ["job-a", "job-d", "job-b"]
    # Rollback restores the previous champion (job-d), a second one the one before it (job-a).
    out = champion.rollback(s["storage"], root, "demo", by="tester")
    assert (out.champion.run, out.champion.reason, out.champion.promoted_by, out.champion.rolled_back) == (
        "job-d", "rollback", "tester", 3)
    out = champion.rollback(s["storage"], root, "demo", by="tester")
    assert out.champion.run == "job-a" and out.champion.seq == 5
    with pytest.raises(NotFound):
        champion.rollback(s["storage"], root, "demo", by="tester")
    assert [champion.read_history(s["storage"], root, "demo", n).run for n in range(1, 6)] == [
        "job-a", "job-d", "job-b", "job-d", "job-a"]


def test_by_detection_the_best_candidate_is_champion_and_is_served_as_the_model_would_be(setting):
    """``--select detection`` (the default): the untrained model detects the surrogate's anomalies worse than a
    baseline, so the baseline is saved as a servable detector and becomes the first champion; ``Scorer.load`` (what
    the scorer service, ``landfall score`` and rescore use) serves it with its own threshold. A rerun on the same data
    detects no better than the champion plus the margin, so the champion is kept; the trained model competes on the
    same surrogate set, whose figures are recorded for every candidate."""
    from landfall.core.scoring import Scorer
    from trainer.judging import baselines, selection

    s = setting
    root = str(s["root"] / "models-d")
    _, job_u, u = _conclude(s, "d-u", s["untrained"], select="detection", models=root)
    det = u["detection"]
    assert det["basis"] == selection.SURROGATE and set(det["candidates"]) == {"model", *baselines.NAMES}
    assert det["surrogate"]["windows"] == sum(s["plan"].val_counts) and det["surrogate"]["anomalous"] == det[
        "surrogate"]["windows"]
    assert det["key"] == "kind_average_precision"  # the surrogate's mean over anomaly kinds (trainer.judging.surrogate)
    scores = {n: f[det["key"]] for n, f in det["candidates"].items()}
    assert det["order"][0] == det["chosen"] == max(scores, key=lambda n: (scores[n], n != "model"))
    assert det["chosen"] != "model" and scores["model"] < scores[det["chosen"]]  # an untrained model loses
    assert u["verdict"] == "promoted" and u["champion"] == job_u.path("detectors", det["chosen"]) == det["model"]
    current, _ = champion.read(s["storage"], root, "demo")
    assert current.model == u["champion"] and current.evaluation["detector"] == det["chosen"]
    assert det["chosen"] in det["why"] and f"{scores[det['chosen']]:.3f}" in det["why"]
    served = Scorer.load(s["storage"], current.model)
    _, x_val = _split(s)
    mu, sd = np.asarray(s["mean"]), np.asarray(s["std"])
    flat = x_val.reshape(-1, SHAPE[1])
    assert served.threshold["value"] == det["threshold"] and served.shape == SHAPE
    assert np.isfinite(served.errors(x_val)).all() and mu.shape == sd.shape == flat.shape[1:]
    # The same surrogate set (a function of the seed and the arrivals) gives the rerun the same scores: kept.
    _, _, again = _conclude(s, "d-again", s["untrained"], select="detection", models=root)
    assert again["detection"]["surrogate"]["seed"] == det["surrogate"]["seed"]
    assert again["verdict"] == "kept_champion" and again["champion_run"] == "d-u"
    assert again["detection"]["champion"][det["key"]] == pytest.approx(scores[det["chosen"]], abs=1e-6)
    # The trained model is scored on the same set; whoever wins, the verdict names it and the champion is its folder.
    _, job_t, t = _conclude(s, "d-t", s["trained"], select="detection", models=root)
    best = t["detection"]["chosen"]
    if t["verdict"] == "promoted":
        assert t["champion"] == (job_t.path(MODEL) if best == "model" else job_t.path("detectors", best))
    else:
        assert t["detection"]["score"] < t["detection"]["champion"][det["key"]] + 0.01


def test_the_held_out_windows_are_read_once_for_every_pass_over_them(setting, monkeypatch):
    """The challenger, the baselines and the champion are scored on one read of the held-out windows (issue #42);
    a share too large to keep (``HELD_OUT_CACHE_BYTES`` 0 here) is read again per pass, with the same figures."""
    from trainer.judging import verdict
    from trainer.training import pipeline

    s = setting
    real, kept = pipeline.read_instances, verdict.HELD_OUT_CACHE_BYTES
    figures = {}
    for cache_bytes in (kept, 0):
        monkeypatch.setattr(verdict, "HELD_OUT_CACHE_BYTES", cache_bytes)
        monkeypatch.setattr(pipeline, "read_instances", real)
        models = str(s["root"] / f"models-once-{cache_bytes}")
        _conclude(s, f"job-first-{cache_bytes}", s["trained"], models=models)  # the champion
        reads: list[str] = []

        def counted(plan, paths, shape, split, _reads=reads, **kwargs):
            _reads.append(split)
            return real(plan, paths, shape, split, **kwargs)

        monkeypatch.setattr(pipeline, "read_instances", counted)
        _, _, got = _conclude(s, f"job-second-{cache_bytes}", s["untrained"], models=models, min_skill=-1e9)
        assert got["verdict"] == "kept_champion" and got["champion_loss"] is not None
        assert reads == [pipeline.TRAIN, pipeline.VALIDATION, *([pipeline.VALIDATION] if cache_bytes == 0 else [])]
        figures[cache_bytes] = ({k: got[k] for k in ("challenger_loss", "champion_loss", "baseline_loss", "skill")},
                                {n: b["loss"] for n, b in got["baselines"].items()}, got["threshold"]["value"])
    assert figures[kept] == figures[0]


def test_no_held_out_data_is_not_evaluated(setting, tmp_path):
    s = setting
    plan = inputs_mod.plan_inputs(s["inputs"], 1, 0, 32, 0.0, 42)
    from trainer.judging import verdict

    job = JobDir(s["storage"], str(tmp_path / "runs" / "job-n"))
    fields = verdict.conclude(s["cfg"], job, Metrics(job, {"job": "job-n"}, True), s["trained"], plan,
                              [str(p) for p in inputs_mod.stage(s["storage"], plan, tmp_path / "shards")],
                              s["inputs"], s["mean"], s["std"], s["storage"])
    assert fields["verdict"] == "not_evaluated" and fields["evaluation"]["reason"] == "no held-out instance"


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_two_jobs_finishing_together_make_one_champion_and_overwrite_nothing(where, tmp_path, request):
    """Both read the same champion, evaluate it (held at a barrier so both decide on the same generation) and
    write: exactly one write lands; the loser re-reads, compares with the winner and decides again."""
    if where == "gcs":
        stack = request.getfixturevalue("emulator_stack")
        bucket = request.getfixturevalue("bucket")
        storage, root = stack.storage, f"gs://{bucket}/models"
    else:
        storage, root = Storage(), str(tmp_path / "models")
    champion.force(storage, root, "d", run="old", model="m/old", evaluation={"loss": 3.0}, by="setup")
    true_loss = {"m/old": 3.0, "m/good": 1.0, "m/bad": 2.0}
    barrier = threading.Barrier(2, timeout=20)
    outcomes: dict[str, tuple] = {}

    def evaluate(current):
        if current.run == "old":
            barrier.wait()
        return true_loss[current.model]

    def finish(run: str) -> None:
        try:
            outcomes[run] = champion.promote_evaluated(storage, root, "d", run=run, model=f"m/{run}",
                                                       loss=true_loss[f"m/{run}"], evaluate=evaluate)
        except Exception as exc:  # reported below: a thread's exception would otherwise pass unseen
            outcomes[run] = (exc,)

    threads = [threading.Thread(target=finish, args=(r,)) for r in ("good", "bad")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not [o for o in outcomes.values() if isinstance(o[0], Exception)], outcomes
    current, _ = champion.read(storage, root, "d")
    assert current.run == "good"  # whatever the order, the better one is the champion
    good, bad = outcomes["good"], outcomes["bad"]
    assert good[0].promoted
    if bad[0].promoted:  # bad won the race, then good replaced it after comparing with it
        assert good[1] == 2.0 and current.previous == bad[0].champion.seq
        runs = ["old", "bad", "good"]
    else:  # good won; bad re-read and compared with good
        assert bad[1] == 1.0 and bad[0].champion.run == "good"
        runs = ["old", "good"]
    assert current.seq == len(runs)
    assert [champion.read_history(storage, root, "d", n).run for n in range(1, len(runs) + 1)] == runs
    with pytest.raises(NotFound):
        champion.read_history(storage, root, "d", len(runs) + 1)


def test_the_result_message_is_bounded_and_sent_once(emulator_stack, bucket, setting):
    from landfall.core.contracts.messages import InputManifest, JobInputs
    from trainer.judging import verdict

    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    topic = f"results-{bucket}"
    pubsub.ensure_topic(topic)
    pubsub.ensure_subscription(topic, topic)
    job_dir = f"gs://{bucket}/runs/job-r"
    inputs_uri = f"{job_dir}/inputs.json"
    requests = [{"request_id": f"r{i}", "reason": "arrival", "manifest": "gs://b/m"} for i in range(50)]
    storage.write_bytes(inputs_uri, JobInputs("demo", "job-r", 1, [InputManifest("gs://b/m", 1)], requests).to_json())
    import dataclasses

    cfg = dataclasses.replace(setting["cfg"], job_dir=job_dir, manifests=(inputs_uri,), results_topic=topic,
                              project=emulator_stack.project)
    job = JobDir(storage, job_dir)
    doc = {"job": "job-r", "dataset": "demo", "status": "succeeded", "verdict": "promoted", "challenger_loss": 0.5,
           "champion_loss": 0.7, "model": f"{job_dir}/model", "champion": f"{job_dir}/model",
           "threshold": {"value": 1.25}, "gpu_seconds": 7200.0, "accelerator": "nvidia-l4", "estimated_cost": 1.12,
           "cost_basis": "chief"}
    assert not verdict.publish_result(cfg, job, {**doc, "status": "failed", "retryable": True}, storage, pubsub)
    assert verdict.publish_result(cfg, job, doc, storage, pubsub)
    assert not verdict.publish_result(cfg, job, doc, storage, pubsub)  # a second attempt of the chief
    from tests.conftest import pull_all

    got = pull_all(pubsub, topic, timeout_s=6.0)
    assert len(got) == 1
    message = results.Result.from_json(got[0].data)
    assert (message.status, message.verdict, message.threshold, message.published_by) == (
        "succeeded", "promoted", 1.25, "chief")
    assert message.arrivals == {"count": 50, "ids": [f"r{i}" for i in range(results.MAX_IDS)], "inputs": inputs_uri}
    assert got[0].attributes["job"] == "job-r"
    assert (message.gpu_seconds, message.accelerator, message.estimated_cost, message.cost_basis) == (
        7200.0, "nvidia-l4", 1.12, "chief")
    assert json.loads(storage.read_bytes(f"{job_dir}/result.json"))["published_at"]


def test_scored_by_rows_the_choice_is_the_nearest_neighbour_whatever_the_surrogate_ranks_first(setting):
    """A dataset scored by each row's own error (``--combine row``, a spec's ``shape.window.combine: row``): without
    labels the verdict serves the nearest neighbour, the fixed detector that beats the surrogate's choice by rows on
    both dev sets (docs/benchmarks.md, "Scored by rows"), even where the surrogate ranks another candidate first. Every
    candidate's surrogate figures are still recorded, and the fixed choice is compared with the champion on them."""
    from trainer.judging import baselines, selection

    s = setting
    root = str(s["root"] / "models-rows")
    _, job, got = _conclude(s, "rows-u", s["untrained"], select="detection", models=root, combine="row")
    det = got["detection"]
    assert det["basis"] == selection.FIXED_FOR_ROWS and det["key"] == "kind_average_precision"
    assert set(det["candidates"]) == {"model", *baselines.NAMES}  # all scored, for the record
    scores = {n: f[det["key"]] for n, f in det["candidates"].items()}
    assert det["chosen"] == baselines.NEAREST == selection.ROWS_DETECTOR and det["order"] == [baselines.NEAREST]
    assert got["verdict"] == "promoted" and got["champion"] == job.path("detectors", baselines.NEAREST)
    assert "fixed choice for a dataset scored by rows" in det["why"]
    # status, trace and the report say a rule chose it, beside the surrogate's figures (not "detects best")
    line = results.detection_line(got)
    assert line.startswith(f"chosen: {baselines.NEAREST} [{baselines.DESCRIPTIONS[baselines.NEAREST]}; rows scored: ")
    assert "] (the fixed choice for rows; kind_average_precision: " in line, line
    # a rerun by rows on the same data is compared with the champion on the surrogate set: kept
    _, _, again = _conclude(s, "rows-again", s["untrained"], select="detection", models=root, combine="row")
    assert again["verdict"] == "kept_champion" and again["champion_run"] == "rows-u"
    assert "replaced_by_rule" not in again["detection"]["champion"]
    # The surrogate's own first choice here is another detector: the rule, not the ranking, chose. A dataset switched
    # to rows replaces that champion (which the surrogate ranks higher, so a score would keep it for ever).
    mean_root = str(s["root"] / "m-mean")
    _, _, by_mean = _conclude(s, "rows-mean", s["untrained"], select="detection", models=mean_root)
    assert by_mean["detection"]["chosen"] == max(scores, key=lambda n: (scores[n], n != "model")) != baselines.NEAREST
    _, job_s, switched = _conclude(s, "rows-switched", s["untrained"], select="detection", models=mean_root,
                                   combine="row")
    assert switched["verdict"] == "promoted" and switched["champion"] == job_s.path("detectors", baselines.NEAREST)
    assert switched["detection"]["champion"]["run"] == "rows-mean"
    assert switched["detection"]["champion"]["replaced_by_rule"] == selection.FIXED_FOR_ROWS
    assert champion.read(s["storage"], mean_root, "demo")[0].evaluation["detector"] == baselines.NEAREST


def test_the_choices_basis_by_labels_by_rows_and_by_the_surrogate():
    """``selection.basis``/``choose``: labels decide whenever there are any, whatever the unit; by rows without them,
    the nearest neighbour alone is eligible (refused, nothing is chosen; absent, the surrogate's choice); otherwise
    the surrogate's order."""
    from trainer.judging import baselines, selection

    scores = {"pca_variance": 0.9, baselines.NEAREST: 0.5, "model": 0.95}
    assert selection.basis(True, "row") == selection.LABELLED and selection.basis(False, "mean") == selection.SURROGATE
    by_rows = selection.choose(scores, selection.basis(False, "row"), lambda _: None, 0.01)
    assert by_rows.chosen == baselines.NEAREST and by_rows.order == (baselines.NEAREST,)
    assert selection.choose(scores, selection.SURROGATE, lambda _: None, 0.01).chosen == "model"
    refused = selection.choose(scores, selection.FIXED_FOR_ROWS, lambda n: "gate" if n == baselines.NEAREST else None)
    assert refused.chosen is None and refused.passed_over == {baselines.NEAREST: "gate"}
    absent = selection.choose({"pca_variance": 0.9, "kmeans": 0.2}, selection.FIXED_FOR_ROWS, lambda _: None)
    assert absent.chosen == "pca_variance" and absent.basis == selection.SURROGATE
    # the champion compared by score: always, but a champion of another detector under the rule for rows
    assert selection.comparable(by_rows, baselines.NEAREST) and not selection.comparable(by_rows, "pca_variance")
    assert not selection.comparable(by_rows, None) and selection.comparable(absent, "model")


def test_a_labelled_recording_is_cut_into_the_jobs_windows_and_decides_even_by_rows(setting):
    """A series dataset's labelled set is a recording, one label per row (``landfall.arrival.labelled_recording``):
    the verdict cuts it into its own windows (``LabelledRecording.windows``) and chooses by the labels, so a dataset
    scored by rows with labels is not held to the fixed choice for rows; ``metrics.json`` says how it was cut."""
    import hashlib

    from landfall.core.artifacts import labelled
    from trainer.judging import selection

    s = setting
    rows = s["x"].reshape(-1, SHAPE[1]).astype(np.float32)  # 3,200 rows of the setting's data, as one recording
    marks = np.zeros(len(rows), np.uint8)
    for at in (700, 1900, 2600):  # three anomalies a row or two long, each row far out of its channels' range
        rows[at:at + 2] += 8 * rows.std(axis=0)
        marks[at:at + 2] = 1
    starts = np.array([0, 1600])  # two segments: no window spans the cut
    data = labelled.encode(rows, marks, starts)
    digest = hashlib.sha256(data).hexdigest()
    folder = s["root"] / "labelled"
    folder.mkdir()
    uri = str(folder / f"{digest}.npz")
    Path(uri).write_bytes(data)
    Path(labelled.manifest_uri(uri)).write_text(json.dumps({
        "schema": labelled.SCHEMA, "kind": labelled.RECORDING, "dataset": "demo", "count": len(rows),
        "positives": int(marks.sum()), "shape": [SHAPE[1]], "sha256": digest, "bytes": len(data), "segments": 2,
        "source": "recording.csv", "label": "label"}))
    _, _, got = _conclude(s, "rows-labelled", s["trained"], select="detection", models=str(s["root"] / "m-lab"),
                          combine="row", labelled=uri)
    det, lab = got["detection"], got["labelled"]
    assert det["basis"] == selection.LABELLED and det["key"] == "labelled_average_precision"
    windows = 2 * (1600 - SHAPE[0] + 1)
    assert lab["instances"] == windows == lab["windows"]["count"] and lab["windows"]["length"] == SHAPE[0]
    assert lab["positives"] == lab["windows"]["positives"] == 3 * (SHAPE[0] + 1)  # every window over each anomaly
    found = {n: f["labelled_average_precision"] for n, f in det["candidates"].items()}
    ranked = {n: v - (0.01 if n == selection.MODEL else 0) for n, v in found.items()}  # the model's margin
    assert ranked[det["chosen"]] == max(ranked.values())
    assert all(0 < v <= 1 for v in found.values()) and max(found.values()) > 0.5  # the spikes are found
