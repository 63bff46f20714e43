"""The champion's view reuses the scorer's results (``trainer.judging.champion_view.reuse``, issue #40 part 4), on the
emulators: an instance dataset whose champion reconstructs every instance as zeros (``helpers.zero_model``: an
instance's error is the mean of its squared values, threshold 0.5), three arrivals committed by the real arrival
stage, several shards each. The champion's job trained on the first; the other two are new, and the scorer
(``landfall.detect.handler``) has scored one, both, or neither of them. The view gives the same counts and flagged
indices whichever it reused, counts what it reused, and when it reuses every new arrival it loads no model and
spawns no child: the champion's SavedModel is removed from the bucket and the view still succeeds."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest

from landfall.core.artifacts import champion as champion_mod
from landfall.core.artifacts import detections
from landfall.core.contracts.layout import Layout
from landfall.core.services.storage import Storage
from landfall.detect import handler
from tests.landfall.detect.helpers import commit, crown, scorer_runtime, zero_model
from trainer.config import TrainerConfig
from trainer.jobdir import JobDir
from trainer.judging import champion_view
from trainer.training import inputs as inputs_mod

SHAPE = (8, 3)
DATASET = "inst"
RECORD_BYTES = SHAPE[0] * SHAPE[1] * 4
SIZES = (300, 420, 380)  # a0 (the champion's), a1, a2
BURSTS = {1: [5, 6, 150, 299, 419], 2: [0, 200, 379]}  # instances of a1 and a2 far off what the champion expects
VOLATILE = ("wall_s", "scored_at", "reused_arrivals", "reused_instances")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return zero_model(tmp_path_factory.mktemp("models") / "zeros", SHAPE, 0.5)


@dataclasses.dataclass
class Setup:
    storage: Storage
    bucket: str
    manifests: list[str]
    requests: list
    rt: object

    def job(self, name: str, tmp_path: Path) -> tuple:
        cfg = TrainerConfig.load({}, manifests=tuple(self.manifests), job_dir=f"gs://{self.bucket}/runs/{name}")
        loaded = inputs_mod.load_manifests(self.storage, self.manifests, SHAPE)
        plan = inputs_mod.plan_inputs(loaded, 1, 0, 16, 0.2, 42)
        paths = inputs_mod.stage(self.storage, plan, tmp_path / name / "stage")
        return cfg, self.storage, JobDir(self.storage, cfg.job_dir), loaded, plan, paths, tmp_path / name, name

    def detect(self, k: int) -> None:
        assert handler.handle(self.requests[k].to_json(), {}, self.rt) == "published"

    def summary(self, k: int) -> detections.Summary:
        found = detections.read(self.storage, self.bucket, Layout(), DATASET, self.requests[k].manifest.split("/")[-2],
                                "job-1")
        assert found is not None
        return found


def _setup(emulator_stack, bucket, topic, arrival_runtime, detections_topic, model) -> Setup:
    storage, pubsub = emulator_stack.storage, emulator_stack.pubsub
    crown(storage, bucket, DATASET, model, run="job-1")
    requests = []
    for k, n in enumerate(SIZES):
        x = np.random.default_rng(k).normal(0, 0.1, (n, *SHAPE)).astype(np.float32)
        x[BURSTS.get(k, [])] += 2.0  # mean square about 4, the others about 0.01
        buf = io.BytesIO()
        np.save(buf, x)
        requests.append(commit(storage, arrival_runtime, bucket, f"incoming/{DATASET}/a{k}.npy", buf.getvalue(),
                               pubsub, topic, timesteps=SHAPE[0], features=SHAPE[1],
                               shard_target_bytes=RECORD_BYTES * 128))
    manifests = [r.manifest for r in requests]
    # The champion's job (no inputs.json: started by hand) trained on a0: a1 and a2 are new.
    storage.write_bytes(f"gs://{bucket}/runs/job-1/metrics.json", json.dumps({"manifests": manifests[:1]}).encode())
    return Setup(storage, bucket, manifests, requests, scorer_runtime(emulator_stack, bucket, detections_topic))


def _expected(setup: Setup) -> dict[str, list[int]]:
    return {setup.manifests[k]: BURSTS[k] for k in (1, 2)}


def _same(view: champion_view.View, base: champion_view.View) -> None:
    strip = lambda record: {k: v for k, v in record.items() if k not in VOLATILE}  # noqa: E731
    assert [{k: v for k, v in a.items() if k != "reused"} for a in view.record["arrivals"]] == \
        [{k: v for k, v in a.items() if k != "reused"} for a in base.record["arrivals"]]
    assert {**strip(view.record), "arrivals": None} == {**strip(base.record), "arrivals": None}
    assert view.flagged == base.flagged


def test_the_view_reuses_the_scorers_results_and_loads_no_model_when_all_are_reused(
        emulator_stack, bucket, topic, arrival_runtime, detections_topic, model, tmp_path, monkeypatch):
    setup = _setup(emulator_stack, bucket, topic, arrival_runtime, detections_topic, model)
    for manifest in setup.manifests:  # several shards an arrival: the index runs across them
        assert len(json.loads(setup.storage.read_bytes(manifest))["shards"]) >= 3

    # No results yet: both new arrivals scored, as before.
    base = champion_view.score(*setup.job("job-base", tmp_path))
    assert base.record["reason"] is None and base.record["champion_run"] == "job-1"
    assert base.record["reused_arrivals"] == 0 and base.record["reused_instances"] == 0
    assert [a["arrival"] for a in base.record["arrivals"]] == [m.split("/")[-2] for m in setup.manifests[1:]]
    assert base.flagged == _expected(setup)
    assert base.record["instances"] == SIZES[1] + SIZES[2] and base.record["flagged"] == 8
    assert not any(a["reused"] for a in base.record["arrivals"])

    # a1 scored on arrival: its flags come from the scorer's results, a2 is scored; the same numbers.
    setup.detect(1)
    mixed = champion_view.score(*setup.job("job-mixed", tmp_path))
    _same(mixed, base)
    assert mixed.record["reused_arrivals"] == 1 and mixed.record["reused_instances"] == SIZES[1]
    assert [a["reused"] for a in mixed.record["arrivals"]] == [True, False]

    # Both scored on arrival, then the champion's SavedModel removed (its threshold.json kept): the view can only
    # come from the results. In the chief's own path (in_child), with no child process allowed either.
    setup.detect(2)
    folder = f"gs://{bucket}/runs/job-1/model/"
    gone = [u for u in setup.storage.list(folder) if not u.endswith("/" + champion_mod.THRESHOLD)]
    assert any(u.endswith("saved_model.pb") for u in gone)
    setup.storage.delete_many(gone)

    class NoChild:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a child process was spawned: every new arrival was scored already")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", NoChild)
    every = champion_view.in_child(*setup.job("job-all", tmp_path))
    _same(every, base)
    assert every.record["reused_arrivals"] == 2 and every.record["reused_instances"] == SIZES[1] + SIZES[2]
    assert every.record["threshold"] == 0.5 and every.record["threshold_quantile"] == 0.99
    assert JobDir(setup.storage, f"gs://{bucket}/runs/job-all").read_json(champion_view.FLAGGED)["flagged"] == \
        {k: v for k, v in _expected(setup).items()}

    # Proof that the model is gone: an arrival whose results cannot be used must be scored, and cannot be now.
    setup.storage.write_bytes(str(setup.summary(2).message["scores"]), b"not parquet")
    broken = champion_view.score(*setup.job("job-broken", tmp_path))
    assert broken.record["flagged"] is None and "cannot score" in broken.record["reason"]


def test_results_that_do_not_fit_are_scored_instead(emulator_stack, bucket, topic, arrival_runtime, detections_topic,
                                                    model, tmp_path):
    setup = _setup(emulator_stack, bucket, topic, arrival_runtime, detections_topic, model)
    setup.detect(1)
    setup.detect(2)
    cfg, storage, job, loaded, plan, paths, work, run = setup.job("job-2", tmp_path)
    current, _ = champion_mod.read(storage, champion_mod.bucket_root(bucket), DATASET)
    new = [i for i, s in enumerate(plan.shards) if s.manifest != setup.manifests[0]]
    one, two = setup.manifests[1:]

    found = champion_view.reuse(storage, loaded, plan, current, new)
    assert set(found.per) == {one, two} and found.flagged == _expected(setup) and found.threshold == 0.5

    # Series arrivals are never looked up (their results are per row, not per window).
    series = dataclasses.replace(plan, shards=tuple(dataclasses.replace(s, series=object()) for s in plan.shards))
    assert champion_view.reuse(storage, loaded, series, current, new).per == {}

    # Another threshold, another count, another kind: not reused (the summary rewritten in place for the test).
    summary = setup.summary(2)
    original = storage.read_bytes(summary.uri)
    for change in ({"threshold": 0.25}, {"count": SIZES[2] - 1}, {"kind": "series"}):
        doc = json.loads(original)
        doc["message"].update(change)
        storage.write_bytes(summary.uri, json.dumps(doc).encode())
        assert set(champion_view.reuse(storage, loaded, plan, current, new).per) == {one}, change
    storage.write_bytes(summary.uri, b"{not json")  # an unreadable summary
    assert set(champion_view.reuse(storage, loaded, plan, current, new).per) == {one}
    storage.write_bytes(summary.uri, original)

    # Scores that contradict their own summary (an anomaly that is not error > threshold) or are not Parquet.
    import pyarrow as pa
    import pyarrow.parquet as pq

    scores = str(setup.summary(1).message["scores"])
    table = pq.read_table(io.BytesIO(storage.read_bytes(scores)))
    flipped = table.set_column(2, "anomaly", pa.array(~np.asarray(table.column("anomaly").to_numpy(), bool)))
    out = io.BytesIO()
    pq.write_table(flipped, out)
    storage.write_bytes(scores, out.getvalue())
    assert set(champion_view.reuse(storage, loaded, plan, current, new).per) == {two}
    storage.write_bytes(scores, b"garbage")
    assert set(champion_view.reuse(storage, loaded, plan, current, new).per) == {two}

    # The job does not fail: a1 is scored, a2 reused, and the numbers are the same.
    view = champion_view.score(cfg, storage, job, loaded, plan, paths, work, run)
    assert view.record["reused_arrivals"] == 1 and view.record["reused_instances"] == SIZES[2]
    assert view.flagged == _expected(setup) and view.record["flagged"] == 8
    assert [a["reused"] for a in view.record["arrivals"]] == [False, True]

    # A champion whose threshold.json is unreadable: nothing reused, the model's load decides (and says why).
    storage.write_bytes(current.model + "/" + champion_mod.THRESHOLD, b"[]")
    assert champion_view.reuse(storage, loaded, plan, current, new) == champion_view.Reused()
