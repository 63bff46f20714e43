"""``landfall score`` on a series file (landfall.cli.score_series, landfall.detect.located): a score per moment from
the windows covering it, the anomalous ranges, precision and recall against a label column, and the report's plot.

Two models. A hand-checkable one reconstructs every window as zeros, so a window's error is the mean of its squared
values and every score below is worked out by hand. A tiny GRU (8 -> 4) trained on the real Daphnet recording
(bench/data/S06R02E0.csv, 16-row windows every 4 rows), whose threshold is the p99 of its held-out windows' errors,
scores the same recording with one freezing-like episode written into it (32 rows of the ankle sensor 8,000 mg off)
and labelled in its own ``is_anomaly`` column."""

from __future__ import annotations

import itertools
import json
import os
import shutil

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from landfall import cli
from landfall.detect.located import Locator
from landfall.local import plots
from landfall.views import page
from landfall_bench import realdata

HAND_SPEC = """apiVersion: landfall.dataset/v1
name: hand
shape: {window: {length: 4, stride: 1}, features: 1}
arrival:
  series: {time_column: t, drop_columns: [label], max_gap: 5}
"""
DAPHNET_SPEC = """apiVersion: landfall.dataset/v1
name: gait
shape: {window: {length: 16, stride: 4}, features: 9}
arrival:
  series: {time_column: timestamp, drop_columns: [is_anomaly]}
"""


def _save(model_dir, serve_fn, shape, norm: dict, threshold: float | None, track=None) -> str:
    import tensorflow as tf

    spec = tf.TensorSpec([None, *shape], tf.float32, name="x")
    module = tf.Module()
    module.model = track  # the variables the serving function reads
    module.serve = tf.function(serve_fn, input_signature=[spec])
    tf.saved_model.save(module, str(model_dir), signatures={"serving_default": module.serve})
    (model_dir / "normalization.json").write_text(json.dumps({"shape": list(shape), "dtype": "float32", **norm}))
    if threshold is not None:
        (model_dir / "threshold.json").write_text(json.dumps({"value": threshold, "quantile": 0.99}))
    return str(model_dir)


@pytest.fixture(scope="module")
def zero_model(tmp_path_factory):
    """Reconstructs every window as zeros: a window's error is the mean of its squared values. Threshold 0.4."""
    import tensorflow as tf

    root = tmp_path_factory.mktemp("zero")
    spec = root / "hand.yaml"
    spec.write_text(HAND_SPEC)
    model = _save(root / "model", lambda x: {"reconstruction": tf.zeros_like(x)}, (4, 1), {"normalized": False}, 0.4)
    return {"model": model, "spec": str(spec)}


def _hand_series(path, times=None) -> None:
    """20 rows, zero but row 10 (2.0), then a gap and 3 rows (a segment shorter than a window); labels: rows 10-13
    and 16-17."""
    v = np.zeros(23)
    v[10] = 2.0
    label = np.zeros(23, np.int64)
    label[[10, 11, 12, 13, 16, 17]] = 1
    t = times if times is not None else [*range(20), 100, 101, 102]
    pd.DataFrame({"t": t, "v": v, "label": label}).to_csv(path, index=False)


def _score(src, model, spec, out, *extra) -> dict:
    assert cli.main(["score", str(src), "--dataset", spec.rsplit("/", 1)[-1].split(".")[0], "--model", model,
                     "--spec", spec, "--out", str(out), "--json", *extra]) == 0
    return json.loads((out.parent / (out.name.removesuffix(".parquet") + ".json")).read_text())


def test_scores_ranges_and_precision_recall_by_hand(zero_model, tmp_path):
    src = tmp_path / "hand.csv"
    _hand_series(src)
    doc = _score(src, zero_model["model"], zero_model["spec"], tmp_path / "hand.scores.parquet")
    rows = pq.read_table(tmp_path / "hand.scores.parquet").to_pydict()
    assert rows["row"] == list(range(23)) and rows["time"][:3] == [0.0, 1.0, 2.0] and rows["label"][10] == 1
    # The windows over row 10 (starting at 7..10) have error 2^2 / 4 = 1, the others 0; a row's score is the mean
    # of the (up to) 4 windows over it: rows 7..13 get 1/4, 2/4, 3/4, 4/4, 3/4, 2/4, 1/4.
    expected = [0.0] * 7 + [0.25, 0.5, 0.75, 1.0, 0.75, 0.5, 0.25] + [0.0] * 6
    np.testing.assert_allclose(rows["score"][:20], expected, atol=1e-12)
    assert all(np.isnan(rows["score"][20:]))  # 3 rows after the gap: no window, no score
    assert rows["anomaly"] == [s > 0.4 for s in expected] + [False] * 3
    assert doc["windows"] == 17 and doc["rows"] == 23 and doc["threshold"] == 0.4  # the model's threshold.json
    assert doc["label"] == "label" and doc["time"] == "number"
    [r] = doc["ranges"]
    assert (r["first_row"], r["last_row"], r["start"], r["end"], r["peak"], r["peak_score"]) == (8, 12, 8, 12, 10, 1.0)
    # Flagged rows 8-12 against labelled rows 10-13, 16, 17: point-wise TP 3 (10-12), FP 2 (8, 9), FN 3 (13, 16,
    # 17): precision 3/5, recall 3/6. Ranges: the one found overlaps the labelled 10-13, not 16-17: 1/1 and 1/2.
    m = doc["labelled"]
    assert m["point"] == {"tp": 3, "fp": 2, "fn": 3, "precision": 0.6, "recall": 0.5}
    assert m["range"] == {"found": 1, "labelled": 2, "precision": 1.0, "recall": 0.5}
    # Threshold-free (issue #38): average precision as scikit-learn computes it, rows without a score ranked lowest;
    # VUS-PR with buffers up to the window length (landfall.core.rules.vus, checked against aeon in test_vus.py).
    from sklearn.metrics import average_precision_score

    from landfall.core.rules import vus

    y, s = np.array(rows["label"]), np.nan_to_num(np.array(rows["score"], np.float64), nan=-1.0)
    assert m["average_precision"] == pytest.approx(average_precision_score(y, s), rel=1e-9)
    assert m["vus_pr"] == pytest.approx(vus.vus_pr(y, s, 4), rel=1e-9) and 0 < m["vus_pr"] <= 1
    assert m["ranking_note"] is None

    # max: a row is as anomalous as the worst window over it, so the range widens by length - 1 = 3 on each side
    # of the spike: rows 7-13, all 1.0; point-wise TP 4 (10-13), FP 3 (7-9), FN 2 (16, 17).
    doc = _score(src, zero_model["model"], zero_model["spec"], tmp_path / "max.scores.parquet", "--combine", "max")
    [r] = doc["ranges"]
    assert (r["first_row"], r["last_row"], r["peak_score"]) == (7, 13, 1.0)
    assert doc["labelled"]["point"] == {"tp": 4, "fp": 3, "fn": 2, "precision": 4 / 7, "recall": 4 / 6}

    # row: each row's own error (its squared value here) averaged over the windows over it, so the spike stays on
    # its row: row 10 scores 4 in each of its 4 windows, every other row 0.
    doc = _score(src, zero_model["model"], zero_model["spec"], tmp_path / "row.scores.parquet", "--combine", "row",
                 "--threshold", "0.4")
    scores = pq.read_table(tmp_path / "row.scores.parquet").column("score").to_pylist()
    np.testing.assert_allclose(scores[:20], [0.0] * 10 + [4.0] + [0.0] * 9, atol=1e-12)
    [r] = doc["ranges"]
    assert (r["first_row"], r["last_row"], r["peak_score"]) == (10, 10, 4.0) and doc["combine"] == "row"
    assert doc["labelled"]["point"] == {"tp": 1, "fp": 0, "fn": 5, "precision": 1.0, "recall": 1 / 6}


def test_row_scores_take_the_models_row_threshold(zero_model, tmp_path, capsys):
    """``--combine row`` flags against ``threshold.json``'s ``row`` value (a row's own error spreads wider than a
    window's, the mean of its rows'); a model saved without one is refused in one line, not flagged on the window's
    threshold."""
    src = tmp_path / "hand.csv"
    _hand_series(src)
    args = ["score", str(src), "--dataset", "hand", "--model", zero_model["model"], "--spec", zero_model["spec"],
            "--out", str(tmp_path / "r.parquet"), "--combine", "row"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "has no row threshold" in err and "pass --threshold" in err and "Traceback" not in err
    model = tmp_path / "with-row"
    shutil.copytree(zero_model["model"], model)
    (model / "threshold.json").write_text(json.dumps({"value": 0.4, "quantile": 0.99, "row": {"value": 5.0}}))
    args[args.index("--model") + 1] = str(model)
    assert cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["threshold"] == 5.0 and doc["anomalies"] == 0  # row 10's 4.0 is under the row threshold
    assert cli.main([*args[:-2], "--json"]) == 0  # mean: the window threshold as before
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.4
    # Valid JSON of the wrong type where a threshold belongs is no threshold: one line, no traceback.
    for doc, combine, wanted in (({"value": 0.4, "row": 5.0}, args, "has no row threshold"),
                                 ({"value": 0.4, "row": {"value": "high"}}, args, "has no row threshold"),
                                 ({"value": 0.4, "row": {"value": True}}, args, "has no row threshold"),
                                 ([0.4], args, "has no row threshold"),
                                 ([0.4], args[:-2], "has no threshold.json"),
                                 ({"value": "0.4"}, args[:-2], "has no threshold.json")):
        (model / "threshold.json").write_text(json.dumps(doc))
        assert cli.main(combine) == 2, doc
        err = capsys.readouterr().err
        assert wanted in err and "Traceback" not in err, err


def test_iso_times_unsorted_rows_and_stride_cover_every_row(zero_model, tmp_path):
    iso = [f"2024-03-01T00:00:{s:02d}Z" for s in range(20)] + ["2024-03-01T00:01:40Z", "2024-03-01T00:01:41Z",
                                                                 "2024-03-01T00:01:42Z"]
    src = tmp_path / "iso.csv"
    _hand_series(src, iso)
    frame = pd.read_csv(src)
    frame.iloc[::-1].to_csv(tmp_path / "reversed.csv", index=False)  # the same series, newest row first
    docs = [_score(tmp_path / name, zero_model["model"], zero_model["spec"], tmp_path / f"{name}.scores.parquet")
            for name in ("iso.csv", "reversed.csv")]
    assert docs[0]["sorted"] and not docs[1]["sorted"]
    for doc in docs:
        [r] = doc["ranges"]
        assert doc["time"] == "timestamp" and r["start_at"] == "2024-03-01T00:00:08.000Z"
        assert (r["end_at"], r["peak_at"]) == ("2024-03-01T00:00:12.000Z", "2024-03-01T00:00:10.000Z")
    # Stride 3 in a 20-row segment: windows start at 0, 3, ..., 15, and one more at 16 ends at the last row, so every
    # row has a score. Row 10 (the 2.0) is only in the window starting at 9 (rows 9-12; error 1): row 9 is also in
    # the one at 6 (0), rows 10 and 11 in no other, row 12 also in the one at 12 (0), rows 8 and 13 in none with it.
    doc = _score(src, zero_model["model"], zero_model["spec"], tmp_path / "s3.scores.parquet", "--stride", "3")
    scores = pq.read_table(tmp_path / "s3.scores.parquet").column("score").to_pylist()
    assert doc["windows"] == 7 and not any(np.isnan(scores[:20]))
    np.testing.assert_allclose(scores[8:14], [0.0, 0.5, 1.0, 1.0, 0.5, 0.0], atol=1e-12)


def test_bad_series_and_labels_get_one_clear_line(zero_model, tmp_path, capsys):
    src = tmp_path / "bad.csv"
    pd.DataFrame({"t": [0, 1, 2, 3, 4, 5], "v": [0.0] * 6, "label": [0, 0, 2, 0, 0, 0]}).to_csv(src, index=False)
    args = ["score", str(src), "--dataset", "hand", "--model", zero_model["model"], "--spec", zero_model["spec"],
            "--out", str(tmp_path / "bad.parquet")]
    assert cli.main(args) == 2
    assert "label_values: label 2 in row 3" in capsys.readouterr().err
    assert cli.main([*args, "--label", "nope"]) == 2
    assert "missing_column: no label column 'nope'" in capsys.readouterr().err
    pd.DataFrame({"t": [0, 1, 1, 3, 4, 5], "v": [0.0] * 6}).to_csv(src, index=False)
    assert cli.main(args) == 0  # the default policy (mean) merges the repeated time's rows
    capsys.readouterr()
    assert json.loads((tmp_path / "bad.json").read_text())["merged_rows"] == 1
    pd.DataFrame({"t": [0, 1, 2], "v": [0.0] * 3}).to_csv(src, index=False)
    assert cli.main(args) == 2
    assert "too_short: 3 rows, fewer than one window of 4" in capsys.readouterr().err


def test_the_locator_streams_the_same_scores_whatever_the_chunks():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.choice([1.0, 1.0, 1.0, 40.0], size=300))  # gaps (max_gap 5) every few rows
    v = rng.normal(size=(300, 2)).astype(np.float32)

    def errors(w: np.ndarray) -> np.ndarray:
        return (w.astype(np.float64) ** 2).mean(axis=(1, 2))

    results = []
    for step in (300, 17, 1):
        loc = Locator(5, 2, 1.2, errors, max_gap=5)
        blocks = [b for lo in range(0, 300, step) for b in loc.feed(t[lo:lo + step], v[lo:lo + step])]
        blocks += list(loc.finish())
        results.append((np.concatenate([b.scores for b in blocks]), [r.as_dict() for r in loc.ranges], loc.windows))
    for scores, ranges, windows in results[1:]:
        np.testing.assert_array_equal(scores, results[0][0])
        assert ranges == results[0][1] and windows == results[0][2]
    # Brute force: each row's score is the mean of the errors of the windows over it (stride 2 from each segment's
    # start, plus one ending at the segment's end).
    scores = results[0][0]
    cuts = [0, *(np.flatnonzero(np.diff(t) > 5) + 1).tolist(), 300]
    for a, b in itertools.pairwise(cuts):
        if b - a < 5:
            assert np.isnan(scores[a:b]).all()
            continue
        starts = list(range(a, b - 4, 2))
        starts += [b - 5] if starts[-1] + 5 < b else []
        for row in range(a, b):
            over = [errors(v[s:s + 5][None])[0] for s in starts if s <= row < s + 5]
            assert scores[row] == pytest.approx(np.mean(over), rel=1e-9)

    # row: the errors function gives each window row's own error ([n, 5]); a row's score is the mean of its own
    # error over the windows that hold it, whatever the chunks, and a window's error (on_errors) the mean of its rows'.
    def row_errors(w: np.ndarray) -> np.ndarray:
        return (w.astype(np.float64) ** 2).mean(axis=2) * (1.0 + np.arange(5))[None]  # depends on the row's place

    rows_results = []
    for step in (300, 17, 1):
        loc = Locator(5, 2, 1.2, row_errors, max_gap=5, combine="row")
        seen: list[np.ndarray] = []
        loc.on_errors = seen.append
        blocks = [b for lo in range(0, 300, step) for b in loc.feed(t[lo:lo + step], v[lo:lo + step])]
        blocks += list(loc.finish())
        rows_results.append(np.concatenate([b.scores for b in blocks]))
        assert np.concatenate(seen).shape == (loc.windows,)
    for scores in rows_results[1:]:
        np.testing.assert_array_equal(scores, rows_results[0])
    for a, b in itertools.pairwise(cuts):
        if b - a < 5:
            continue
        starts = list(range(a, b - 4, 2))
        starts += [b - 5] if starts[-1] + 5 < b else []
        for row in range(a, b):
            own = [row_errors(v[s:s + 5][None])[0, row - s] for s in starts if s <= row < s + 5]
            assert rows_results[0][row] == pytest.approx(np.mean(own), rel=1e-9)
    with pytest.raises(ValueError, match="needs each window row's error"):
        list(Locator(5, 2, 1.2, errors, max_gap=5, combine="row").feed(t[:20], v[:20]))


@pytest.fixture(scope="module")
def daphnet_model(tmp_path_factory):
    """A GRU 8 -> 4 trained on Daphnet's own 16-row windows (every 4 rows) of its first 5,000 rows; threshold the
    p99 of the errors of the windows of the rest."""
    import tf_keras as keras

    from landfall.core import scoring
    from trainer.training.model import build_model

    root = tmp_path_factory.mktemp("gait")
    rows = pd.read_csv(realdata.DATA / "S06R02E0.csv")[list(realdata.DAPHNET_CHANNELS)].to_numpy(np.float32)
    x = realdata.sliding_windows(rows, 16, 4)
    train, held = x[:1200], x[1300:]
    mean, std = train.reshape(-1, 9).mean(0), train.reshape(-1, 9).std(0)
    keras.utils.set_random_seed(0)
    model = build_model(16, 9, (8, 4), 0.0, 1e-2)
    z = ((train - mean) / std).astype(np.float32)
    model.fit(z, z, epochs=4, batch_size=64, verbose=0)
    threshold = float(np.quantile(scoring.Scorer.from_model(model, mean, std, (16, 9)).errors(held), 0.99))
    path = _save(root / "model", lambda v: {"reconstruction": model(v, training=False)}, (16, 9),
                 {"normalized": True, "mean": mean.tolist(), "std": std.tolist()}, threshold, model)
    spec = root / "gait.yaml"
    spec.write_text(DAPHNET_SPEC)
    return {"model": path, "spec": str(spec), "threshold": threshold}


def test_daphnet_ranges_name_the_episode_written_into_it(daphnet_model, tmp_path, capsys):
    src = tmp_path / "S06R02E0.csv"
    shutil.copyfile(realdata.DATA / "S06R02E0.csv", src)
    plain = _score(src, daphnet_model["model"], daphnet_model["spec"], tmp_path / "plain.scores.parquet")
    # The recording as shipped: every row scored, its label column found, and it has no labelled episode.
    assert plain["rows"] == 7040 and plain["windows"] == (7040 - 16) // 4 + 1 and plain["label"] == "is_anomaly"
    assert plain["labelled"]["positives"] == 0 and plain["labelled"]["point"]["recall"] is None
    assert plain["time"] == "timestamp" and plain["max_gap"] == pytest.approx(3 * 0.015625, rel=0.1)

    frame = pd.read_csv(src, dtype={"timestamp": str})
    frame.loc[5000:5031, "ankle_horiz_fwd"] += 8000  # rows 5000-5031 (.loc slices include their end)
    frame.loc[5000:5031, "is_anomaly"] = 1
    src = tmp_path / "episode.csv"
    frame.to_csv(src, index=False)
    out = tmp_path / "episode.scores.parquet"
    assert cli.main(["score", str(src), "--dataset", "gait", "--model", daphnet_model["model"], "--spec",
                     daphnet_model["spec"], "--out", str(out), "--plot", str(tmp_path / "episode.png")]) == 0
    text = capsys.readouterr().out
    doc = json.loads((tmp_path / "episode.scores.json").read_text())
    hit = [r for r in doc["ranges"] if r["first_row"] <= 5031 and r["last_row"] >= 5000]
    assert len(hit) == 1, doc["ranges"]
    [r] = hit
    assert 5000 <= r["peak_row"] <= 5031  # the score peaks inside the episode
    assert r["first_row"] >= 5000 - 15 and r["last_row"] <= 5031 + 15  # within a window length of it
    times = pq.read_table(out, columns=["time"]).column("time").to_numpy()
    assert (r["start"], r["end"], r["peak"]) == (times[r["first_row"]], times[r["last_row"]], times[r["peak_row"]])
    assert r["peak_at"].startswith("1970-01-01T00:0") and r["peak"] == pytest.approx(280 + 5000 / 64, abs=0.6)
    m = doc["labelled"]
    assert m["positives"] == 32 and m["point"]["recall"] == 1.0 and m["range"]["recall"] == 1.0
    assert m["point"]["tp"] == 32 and m["point"]["precision"] == 32 / m["flagged"]
    assert m["range"]["precision"] == 1 / len(doc["ranges"])
    assert r["start_at"] in text and "range-based precision" in text
    # The report draws it: the score, the threshold, one shaded rect per range, the labelled episode.
    s = page.read_scored(out, points=500)
    assert len(s["scores"]) <= 500 and s["labelled_ranges"] == [{"start": times[5000], "end": times[5031]}]
    assert max(v for v in s["scores"] if v is not None) == pytest.approx(max(x["peak_score"] for x in doc["ranges"]))
    svg = page.scored_svg(s)
    assert svg.count('class="range"') == len(doc["ranges"]) and svg.count('class="labelled"') == 1
    html_text = page.render({"bucket": "b", "generated_at": "now", "datasets": [], "rejections": [],
                          "rejections_by_reason": [], "dead_letters": [], "scored": [s]})
    assert 'id="scored"' in html_text and r["start_at"] in html_text
    assert (tmp_path / "episode.png").stat().st_size > 10_000
    assert plots.series_scores(s, tmp_path / "again.png").exists()


def test_a_label_column_comes_out_of_a_spec_that_names_no_channels(zero_model, tmp_path):
    """A user's ``timestamp,value,is_anomaly`` export and a spec that names neither channels nor dropped columns: the
    label (named or looked for) is taken out of the channels, so the file scores without editing the spec."""
    spec = tmp_path / "plain.yaml"
    spec.write_text(HAND_SPEC.replace("name: hand", "name: plain").replace(", drop_columns: [label]", ""))
    src = tmp_path / "plain.csv"
    _hand_series(src)
    frame = pd.read_csv(src).rename(columns={"label": "is_anomaly"})
    frame.to_csv(src, index=False)
    for extra in ((), ("--label", "is_anomaly")):
        doc = _score(src, zero_model["model"], str(spec), tmp_path / "plain.scores.parquet", *extra)
        assert doc["label"] == "is_anomaly" and doc["labelled"]["positives"] == 6, doc
    # A spec that names its channels still decides: naming one of them as the label is refused in one line.
    named = tmp_path / "named.yaml"
    named.write_text(HAND_SPEC.replace("name: hand", "name: named").replace("drop_columns: [label]", "channels: [v]"))
    assert cli.main(["score", str(src), "--dataset", "named", "--model", zero_model["model"], "--spec", str(named),
                     "--out", str(tmp_path / "n.parquet"), "--label", "v"]) == 2


def test_every_row_sent_comes_back_in_its_place(zero_model, tmp_path, capsys):
    """Issue #55: a user's export that repeats times and is not sorted gets one score per row it sent, in its order
    (``landfall.detect.score``; tests/landfall/detect/test_input_rows.py covers each case), and the plot draws it in
    time order."""
    src = tmp_path / "hand.csv"
    _hand_series(src)
    frame = pd.read_csv(src)
    user = pd.concat([frame, frame.iloc[[10, 3]]]).sample(frac=1.0, random_state=3).reset_index(drop=True)
    user.to_csv(src, index=False)
    out = tmp_path / "hand.scores.parquet"
    assert cli.main(["score", str(src), "--dataset", "hand", "--model", zero_model["model"], "--spec",
                     zero_model["spec"], "--out", str(out), "--plot", str(tmp_path / "hand.png")]) == 0
    text = capsys.readouterr().out
    doc = json.loads((tmp_path / "hand.scores.json").read_text())
    rows = pq.read_table(out).to_pandas()
    assert doc["rows"] == len(rows) == 25 and doc["series_rows"] == 23 and doc["merged_rows"] == 2
    assert not doc["sorted"] and rows["row"].tolist() == list(range(25))
    assert rows["time"].tolist() == user["t"].astype(float).tolist()
    assert rows["label"].tolist() == user["label"].tolist()
    # Every row carries its time's score, as the hand-worked series has it (time 10: 1.0, time 3: 0.0).
    expected = dict(enumerate([0.0] * 7 + [0.25, 0.5, 0.75, 1.0, 0.75, 0.5, 0.25] + [0.0] * 6))
    for t, score in zip(rows["time"], rows["score"], strict=True):
        assert score == pytest.approx(expected[t], abs=1e-12) if t < 20 else np.isnan(score)
    [r] = doc["ranges"]
    flagged = rows[rows["anomaly"]]
    assert sorted(flagged["time"]) == [8, 9, 10, 10, 11, 12] and r["rows"] == 6 == doc["anomalies"]
    assert (r["first_row"], r["last_row"]) == (flagged["row"].min(), flagged["row"].max())
    assert r["peak_row"] == rows.loc[rows["time"] == 10, "row"].min()
    assert "25 rows" in text and "23 distinct times scored: 2 rows merged with another row of their time" in text
    assert (tmp_path / "hand.png").stat().st_size > 10_000


def test_the_specs_combine_is_the_locators():
    """``shape.window.combine`` (the spec's row score) names exactly the Locator's rules: a rule added to one and not
    the other fails here; a spec without it combines by the mean."""
    from landfall.core.artifacts import specs
    from landfall.core.errors import Invalid
    from landfall.core.rules.series_windows import COMBINE

    window = specs.schema()["properties"]["shape"]["properties"]["window"]["properties"]
    assert window["combine"]["enum"] == list(COMBINE)
    doc = {"apiVersion": specs.API_VERSION, "name": "hand", "shape": {"window": {"length": 4}, "features": 1},
           "arrival": {"series": {"time_column": "t"}}}
    assert specs.DatasetSpec.from_document(specs.validate(doc, "hand.yaml"), None).combine == "mean"
    doc["shape"]["window"]["combine"] = "row"
    assert specs.DatasetSpec.from_document(specs.validate(doc, "hand.yaml"), None).combine == "row"
    doc["shape"]["window"]["combine"] = "median"
    with pytest.raises(Invalid, match="median"):
        specs.validate(doc, "hand.yaml")
