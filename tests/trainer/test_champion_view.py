"""The champion's view of new data (``trainer.judging.champion_view``), on a real series: Daphnet S06R02E0 (9 channels,
mg) cut into windows and into three arrivals. A first job trains on the first and becomes the champion; a second job
covers all three, the second with 5 % of its windows made anomalous, the third clean. The second job's metrics
report, per new arrival, how many windows exceed the champion's threshold."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pytest

from landfall.core.artifacts import results
from landfall.core.contracts.messages import InputManifest, JobInputs
from landfall.core.services.storage import Storage
from landfall.views import page
from landfall_bench import realdata
from tests.trainer.helpers import make_array, run_trainer, write_dataset
from trainer.config import TrainerConfig
from trainer.jobdir import JobDir
from trainer.judging import champion_view

T, F = 24, 9
ARGS = ["--timesteps", str(T), "--features", str(F), "--units", "8,4", "--batch-size-per-worker", "64",
        "--learning-rate", "0.01", "--dropout", "0", "--shuffle-buffer", "256", "--verbose", "0", "--min-skill", "-1",
        "--early-stopping-patience", "0", "--deterministic"]


def _inputs(runs: Path, job: str, seq: int, after: str | None, manifests: list[str]) -> str:
    (runs / job).mkdir(parents=True, exist_ok=True)
    doc = JobInputs(dataset="demo", job=job, seq=seq, after=after, requests=[],
                    manifests=[InputManifest(uri=m, generation=1) for m in manifests])
    path = runs / job / "inputs.json"
    path.write_bytes(doc.to_json())
    return str(path)


def _arrivals(tmp_path: Path) -> tuple[list[str], np.ndarray]:
    """Three arrivals of windows (stride 4) of consecutive parts of the recording; 5 % of the second's windows get
    a burst (every channel shifted by 6 of its standard deviations); returns the manifests and the burst indices."""
    _, values, _ = realdata.daphnet()
    parts = [values[:3600], values[3600:5400], values[5400:]]
    windows = [realdata.sliding_windows(p, T, 4).astype("<f4") for p in parts]
    rng = np.random.default_rng(7)
    burst = np.sort(rng.choice(len(windows[1]), size=len(windows[1]) // 20, replace=False))
    windows[1][burst] += 6 * values.std(0)
    storage = Storage()
    uris = [write_dataset(storage, str(tmp_path / "data" / f"a{i + 1}"), w, shards=2, arrival_id=f"a{i + 1}")
            for i, w in enumerate(windows)]
    return uris, burst


def test_new_arrivals_are_scored_by_the_champion(tmp_path):
    uris, burst = _arrivals(tmp_path)
    runs = tmp_path / "runs"
    one = run_trainer(["--inputs", _inputs(runs, "demo-1", 1, None, uris[:1]), "--job-dir", str(runs / "demo-1"),
                       "--epochs", "3", *ARGS])
    assert one.returncode == 0, one.stderr[-3000:]
    first = json.loads((runs / "demo-1" / "metrics.json").read_text())
    assert first["verdict"] == "promoted"
    view = first["champion_view"]  # no champion: null with the reason, not zero
    assert view["flagged"] is None and view["instances"] is None and "no champion" in view["reason"]

    two = run_trainer(["--inputs", _inputs(runs, "demo-2", 2, "demo-1", uris), "--job-dir", str(runs / "demo-2"),
                       "--epochs", "1", "--exclude-flagged", *ARGS])
    assert two.returncode == 0, two.stderr[-3000:]
    view = json.loads((runs / "demo-2" / "metrics.json").read_text())["champion_view"]
    assert view["champion_run"] == "demo-1" and view["reason"] is None
    assert view["threshold"] == first["detection"]["threshold"]  # the champion's (the candidate demo-1 promoted)
    assert view["champion_model"] == first["champion"]
    by = {a["arrival"]: a for a in view["arrivals"]}
    assert set(by) == {"a2", "a3"}  # a1 was the champion's: not new
    dirty, clean = by["a2"], by["a3"]
    n_dirty = json.loads(Path(uris[1]).read_text())["count"]
    assert dirty["instances"] == n_dirty and clean["instances"] == json.loads(Path(uris[2]).read_text())["count"]
    flagged = json.loads((runs / "demo-2" / "champion_view.json").read_text())["flagged"]
    caught = set(flagged[uris[1]])
    assert len(caught & set(burst.tolist())) >= 0.95 * len(burst), (len(caught), len(burst))
    assert dirty["flagged"] == len(caught) and 0.045 <= dirty["fraction"] <= 0.12, dirty
    # A p99 threshold on a recording that moves on (the clean arrival is the gait's later activity): a tenth at most.
    # Measured (issue #55): under 6 % in original units, where the two loudest channels decided alone; 6.9 % with
    # every channel in its own spread (error_scale) and pca the champion; 10.4 % with pca_variance the champion
    # (95 % of the variance fits the first 3,600 rows tighter), as on the dirty arrival's clean windows.
    assert clean["fraction"] <= 0.12, clean
    assert view["flagged"] == dirty["flagged"] + clean["flagged"]

    # exclude_flagged: the flagged windows are in neither split, and the plan's counts say so exactly.
    doc = json.loads((runs / "demo-2" / "metrics.json").read_text())
    assert view["exclude_flagged"] is True and view["excluded"] == view["flagged"] > 0
    assert dirty["excluded"] == dirty["flagged"] and clean["excluded"] == clean["flagged"]
    counted = {a["manifest"]: a for a in doc["instances"]["arrivals"]}
    assert counted[uris[0]].get("excluded", 0) == 0 and counted[uris[1]]["excluded"] == dirty["flagged"]
    for a in counted.values():  # the random hold-out: every record not excluded is on one side
        assert a["train"] + a["validation"] == a["instances"] - a.get("excluded", 0)
    assert doc["instances"]["train"] == sum(a["train"] for a in counted.values())
    assert doc["evaluation"]["instances"] == doc["instances"]["validation"]  # one worker: its held-out share

    # The result message carries a bounded copy; status, trace and the report print one line from it.
    doc = json.loads((runs / "demo-2" / "metrics.json").read_text())
    message = results.from_metrics(doc, job="demo-2", dataset="demo", status="succeeded", inputs_uri=None,
                                   storage=Storage(), published_by="chief")
    again = results.Result.from_json(message.to_json())
    assert again.champion_view is not None and again.champion_view["flagged"] == view["flagged"]
    assert [a["arrival"] for a in again.champion_view["arrivals"]] == ["a2", "a3"]
    line = results.champion_view_line(view)
    most = max(view["arrivals"], key=lambda a: a["fraction"])  # the line names the arrival flagged most (its share)
    assert f"{view['flagged']} of {view['instances']}" in line and "demo-1" in line
    assert f"most: {most['arrival']}, {most['flagged']} of {most['instances']}" in line
    assert "none (dataset demo has no champion)" in results.champion_view_line(first["champion_view"])
    assert line in html.unescape(page.skill_html({"champion_view": view}))


def test_a_restarted_job_reuses_its_first_record(tmp_path):
    """An earlier attempt's record (metrics.json) and flagged indices (champion_view.json) are reused, not
    recomputed: the champion may have changed since, and every attempt must record the same numbers."""
    storage = Storage()
    job = JobDir(storage, str(tmp_path / "runs" / "demo-3"))
    record = {"champion_run": "demo-1", "flagged": 3, "instances": 10, "arrivals": [], "reason": None}
    job.write_json("metrics.json", {"champion_view": record})
    job.write_json(champion_view.FLAGGED, {"flagged": {"m.json": [1, 4, 9]}})
    cfg = TrainerConfig.load({}, manifests=("x",), job_dir=job.uri)
    view = champion_view.score(cfg, storage, job, None, None, [], tmp_path, "demo-3")  # type: ignore[arg-type]
    assert view.reused and view.record == record and view.flagged == {"m.json": [1, 4, 9]}
    (tmp_path / "runs" / "demo-3" / champion_view.FLAGGED).unlink()  # flagged indices lost: score again
    with pytest.raises(AttributeError):  # (no inputs given here: it tries to, and fails on them)
        champion_view.score(cfg, storage, job, None, None, [], tmp_path, "demo-3")  # type: ignore[arg-type]


def test_excluded_records_are_in_neither_split_and_the_shares_stay_exact(tmp_path):
    """The pipeline's filter (``trainer.training.pipeline.read_blocks``, keyed on (arrival, index in the arrival)) reads
    exactly the plan's counts, on every worker, and none of the excluded records."""
    from trainer.training import pipeline
    from trainer.training.inputs import load_manifests, plan_inputs, stage

    storage = Storage()
    arrays = [make_array(700, seed=1, shape=(8, 3)), make_array(500, seed=2, shape=(8, 3))]
    for a in arrays:  # every instance recognisable by its first value
        a[:, 0, 0] = np.arange(len(a)) + (0 if a is arrays[0] else 10_000)
    uris = [write_dataset(storage, str(tmp_path / f"a{k}"), a, shards=3, arrival_id=f"a{k}")
            for k, a in enumerate(arrays)]
    inputs = load_manifests(storage, uris, (8, 3))
    gone = {uris[1]: sorted(np.random.default_rng(3).choice(500, 60, replace=False).tolist())}
    base = plan_inputs(inputs, 2, 0, 16, 0.2, seed=5)
    seen: list[float] = []
    for worker in range(2):
        plan = plan_inputs(inputs, 2, worker, 16, 0.2, seed=5, excluded=gone)
        assert sum(plan.train_counts) + sum(plan.val_counts) == sum(base.train_counts) + sum(base.val_counts) - 60
        assert max(plan.train_counts) - min(plan.train_counts) <= 1
        paths = [str(p) for p in stage(storage, plan, tmp_path / f"w{worker}")]
        for split, want in ((pipeline.TRAIN, plan.train_counts[worker]),
                            (pipeline.VALIDATION, plan.val_counts[worker])):
            x = np.concatenate(list(pipeline.read_instances(plan, paths, (8, 3), split).as_numpy_iterator()))
            assert len(x) == want
            seen += x[:, 0, 0].tolist()
    assert len(seen) == len(set(seen)) == 1200 - 60
    assert not set(seen) & {10_000 + i for i in gone[uris[1]]}


def test_series_windows_are_scored_by_arrival_and_index_and_excluded(tmp_path):
    """A series dataset (windows cut when read, ``trainer.training.windows``): every new window is scored once and
    attributed to its (arrival, index), and with those indices excluded the windows read are exactly the plan's, without
    them."""
    import pandas as pd

    from landfall.arrival import converter
    from landfall.arrival.config import ConverterConfig
    from landfall.core import scoring
    from trainer.training import inputs, windows

    cfg = ConverterConfig(timesteps=8, features=2, window_stride=3, series_time_column="t",
                          shard_target_bytes=4 * 2 * 400)
    rows = {}
    for k, (name, n) in enumerate([("s1", 2000), ("s2", 1400)]):
        values = np.random.default_rng(k).normal(size=(n, 2)).astype(np.float32)
        pd.DataFrame({"t": np.arange(n), "a": values[:, 0], "b": values[:, 1]}).to_csv(tmp_path / f"{name}.csv",
                                                                                       index=False)
        converter.convert(str(tmp_path / f"{name}.csv"), str(tmp_path / "out" / name), "d", cfg, Storage("t"))
        rows[name] = values
    storage = Storage("t")
    loaded = inputs.load_manifests(storage, [str(tmp_path / "out")], (8, 2))
    plan = inputs.plan_inputs(loaded, 1, 0, 16, 0.2, 42)
    paths = inputs.stage(storage, plan, tmp_path / "stage")
    blank = scoring.Scorer(lambda z: np.zeros_like(z), None, None)  # error = the window's mean square
    run_cfg = TrainerConfig.load({}, manifests=("x",), job_dir=str(tmp_path / "job"))
    per, flagged = champion_view.score_shards(run_cfg, storage, plan, paths, tmp_path, list(range(len(plan.shards))),
                                              blank, 1.3, (8, 2))
    for manifest, entry in per.items():
        name = manifest.rsplit("/", 2)[-2]
        shard = next(s for s in plan.shards if s.manifest == manifest)
        starts = shard.series.starts(np.arange(entry["instances"]))
        errors = np.array([(rows[name][s:s + 8].astype(np.float64) ** 2).mean() for s in starts])
        assert entry["instances"] == sum(s.count for s in plan.shards if s.manifest == manifest)
        assert flagged.get(manifest, []) == np.flatnonzero(errors > 1.3).tolist() and entry["flagged"] > 0
    gone = inputs.plan_inputs(loaded, 1, 0, 16, 0.2, 42, excluded=flagged)
    assert sum(gone.train_counts) + sum(gone.val_counts) < sum(plan.train_counts) + sum(plan.val_counts)
    for split, want in ((windows.TRAIN, gone.train_counts[0]), (windows.VALIDATION, gone.val_counts[0])):
        got = list(windows.read_windows(gone, paths, (8, 2), split, deterministic=True).as_numpy_iterator())
        assert sum(len(b) for b in got) == want
        for i, starts in windows.window_starts(gone, split):
            shard = gone.shards[i]
            first = int(shard.series.starts([shard.arrival_start])[0])
            picked = set((first + starts).tolist())
            assert not picked & set(shard.series.starts(flagged.get(shard.manifest, [])).tolist())
