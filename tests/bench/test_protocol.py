"""``landfall bench detect`` (landfall_bench.protocol): the dev series cut as TSB-AD cuts them, checked against
TSB-AD's own published figures for each (its length, labelled rows and anomaly count)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from landfall_bench import controls, protocol


@pytest.mark.parametrize("name", sorted(json.loads((protocol.dev_root() / "series.json").read_text())))
def test_a_dev_series_is_tsb_ads(name):
    data = protocol.dev_series(name)
    published = data["published"]
    labels = data["labels"]
    assert len(data["values"]) == len(labels) == int(published["ts_len"])
    assert int(labels.sum()) == int(published["anomaly_len"])  # NAB's windows, start included, end excluded
    runs = np.flatnonzero(np.diff(np.r_[0, labels, 0]) == 1)
    assert len(runs) == int(published["num_anomaly"])
    assert data["train_rows"] == int(name.split("_tr_")[1].split("_")[0])


def test_kendall_agreement():
    assert protocol.kendall([0.9, 0.8, 0.7], [0.5, 0.4, 0.3]) == pytest.approx(1.0)
    assert protocol.kendall([0.9, 0.8, 0.7], [0.3, 0.4, 0.5]) == pytest.approx(-1.0)
    assert protocol.kendall([0.9], [0.1]) is None


def test_the_baselines_and_their_ensemble_on_a_real_series(tmp_path):
    """Without a trainer run (no option): the in-run baselines and PCA+NN on NAB 014 at its period, one seed. The
    ensemble's two errors are each scaled by their held-out median, so neither dominates by its units: it lands at
    least at the worse of the two (here it ties the nearest neighbour, the better)."""
    import argparse

    name = next(n for n in json.loads((protocol.dev_root() / "series.json").read_text()) if n.startswith("014_"))
    out = protocol.run_series(name, protocol.dev_series(name), argparse.Namespace(
        seeds=1, options=[], epochs=1, combine="mean", half=""), tmp_path)
    vus = {b: f[0]["vus_pr"] for b, f in out["baselines"].items()}
    assert set(vus) == {"mean_window", "pca", "nearest_neighbour", "kmeans", "pca_variance", "pca_rows",
                        "kmeans_znorm", protocol.ENSEMBLE}
    assert out["window"] == 23 and all(0.0 < v <= 1.0 for v in vus.values())
    assert min(vus["pca"], vus["nearest_neighbour"]) <= vus[protocol.ENSEMBLE]
    assert vus[protocol.ENSEMBLE] == pytest.approx(vus["nearest_neighbour"], abs=0.01)
    assert "| PCA+NN |" in protocol.table([out]).splitlines()[0]
    # The verdict's label-free choice on the seed's surrogate set, and the ensemble of every candidate
    # (landfall_bench.controls): the choice is one of the candidates, and its VUS-PR is that candidate's.
    (seed,) = out["controls"]
    assert seed["chosen"] in vus and set(seed["surrogate"]) == set(vus) - {protocol.ENSEMBLE}
    assert 0.0 < seed["ensemble"]["vus_pr"] <= 1.0
    rules = controls.rules([out])[name]
    assert rules[controls.CHOICE] == vus[seed["chosen"]] and rules[controls.ENSEMBLE] == seed["ensemble"]["vus_pr"]
    assert rules[controls.FIXED] == rules[controls.BEST] == max(v for b, v in vus.items() if b != protocol.ENSEMBLE)


def test_located_many_is_located_per_detector():
    """One pass over the windows gives every detector's row scores exactly as a pass of its own does."""
    from landfall_bench.detect import located

    rows = np.random.default_rng(7).normal(size=(9_000, 2)).astype(np.float32)  # 3 blocks of the Locator's 4,096

    def errors(x):
        return {"sum": x.sum(axis=(1, 2)), "max": x.max(axis=(1, 2))}

    many = protocol.located_many(errors, rows, 16)
    assert set(many) == {"sum", "max"}
    for name, scores in many.items():
        assert np.array_equal(scores, located(lambda x, n=name: errors(x)[n], rows, 16))


def test_the_shipped_multivariate_recording_is_tsb_ads(monkeypatch):
    """``bench/data/multivariate-dev/``: MSL's recording unchanged (series.json's digest), cut as TSB-AD cuts it."""
    import hashlib

    monkeypatch.setenv("LANDFALL_MV_DEV", str(protocol.MV_DEV))
    assert protocol.mv_root() == protocol.MV_DEV
    docs = protocol.mv_docs()
    assert list(docs) == ["002_MSL_id_1_Sensor_tr_500_1st_900"]  # series.json lists six; the one shipped is read
    doc = docs["002_MSL_id_1_Sensor_tr_500_1st_900"]
    assert hashlib.sha256((protocol.MV_DEV / doc["csv"]).read_bytes()).hexdigest() == doc["csv_sha256"]
    data = protocol.mv_series("002_MSL_id_1_Sensor_tr_500_1st_900")
    assert data["values"].shape == (1827, 55) and data["train_rows"] == 500
    assert int(data["labels"].sum()) == 11 and int(np.argmax(data["labels"])) == doc["first_anomaly"] == 900
    assert len(data["published"]) == 23 and data["published"]["KMeansAD"] == pytest.approx(0.9960656085287)


def test_the_multivariate_set_with_baselines_only_on_the_shipped_msl(tmp_path, monkeypatch, capsys):
    """``landfall bench detect --set multivariate --baselines-only`` on the one recording a clone has: no trainer run,
    the baselines as the verdict fits them (the segment hold-out of seed 0), TSB-AD-M's published figures beside them.
    Seconds: 213 fitted windows of D = 125 x 55 values, so PCA takes the SVD of the windows, not a D x D eigh."""
    monkeypatch.setenv("LANDFALL_MV_DEV", str(protocol.MV_DEV))
    assert protocol.main(["--set", "multivariate", "--baselines-only", "--seeds", "1", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    lines = [line for line in printed.split("against its controls")[0].splitlines() if line.startswith("|")]
    assert "| **mean of 1** |" in printed.split("against its controls")[1]  # the controls' table follows
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(head, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    assert len(lines) == 3  # the header, its rule, one series (no mean row for one)
    assert head[:8] == ["series", "rows x channels", "window", "fitted on", "option",
                        "champion VUS-PR, median [min-max]", "picked", "model"]
    assert head[-9:] == ["TSB-AD-M best", *(f"TSB {d}" for d in protocol.MV_PUBLISHED), "goal"]
    assert {"mean_window", "pca", "nearest_neighbour", protocol.ENSEMBLE} <= set(head)
    assert row["series"] == "002_MSL_id_1_Sensor_tr_500_1st_900" and row["rows x channels"] == "1827 x 55"
    assert row["window"] == "125" and row["option"] == "baselines only" and row["model"] == "-"
    assert row["TSB-AD-M best"] == "0.996 (KMeansAD)" and row["TSB PCA"] == "0.128"
    (result,) = json.loads((tmp_path / "protocol.json").read_text())
    assert result["set"] == protocol.MULTIVARIATE and result["runs"] == {} and result["fitted_on"] == [213]
    for name, figures in result["baselines"].items():
        (vus,) = [f["vus_pr"] for f in figures]
        assert np.isfinite(vus) and 0.0 <= vus <= 1.0, name
        assert row[name] == f"{vus:.3f}"


def test_with_a_trained_run_the_choice_is_its_champion_and_the_model_a_candidate():
    """``landfall_bench.controls`` on runs that trained (made-up figures, two series, two seeds): control (a) is the
    candidate best on average over the series (the model here), the choice the run's champion, regret against the
    labelled best per series."""
    def run(champion: str, vus: dict, ensemble: float) -> dict:
        return {"detector": champion, "champion": {"vus_pr": vus[champion]}, "labelled_vus_pr": vus,
                "ensemble": {"vus_pr": ensemble}}

    a = {"series": "a", "baselines": {}, "runs": {"default": [
        run("pca", {"model": 0.6, "pca": 0.5, "nearest_neighbour": 0.9}, 0.7),
        run("model", {"model": 0.8, "pca": 0.5, "nearest_neighbour": 0.9}, 0.5)]}}
    b = {"series": "b", "baselines": {}, "runs": {"default": [
        run("nearest_neighbour", {"model": 0.9, "pca": 0.3, "nearest_neighbour": 0.2}, 0.4),
        run("model", {"model": 0.7, "pca": 0.3, "nearest_neighbour": 0.2}, 0.6)]}}
    found = controls.rules([a, b], "default")
    assert found["a"]["fixed"] == found["b"]["fixed"] == "model"  # mean of medians: model 0.75, nn 0.55, pca 0.4
    assert found["a"][controls.CHOICE] == pytest.approx(0.65) and found["a"]["picked"] == "model,pca"
    assert found["a"][controls.FIXED] == pytest.approx(0.7) and found["a"][controls.BEST] == pytest.approx(0.9)
    assert found["b"][controls.ENSEMBLE] == pytest.approx(0.5) and found["b"]["best"] == "model"
    lines = controls.table([a, b], "default").splitlines()
    assert lines[-1] == "| **mean of 2** | 0.550 | 0.300 | 0.750 | 0.100 | 0.550 | 0.300 | 0.850 |"


def test_row_location_scores_each_row_by_its_own_error(tmp_path):
    """``--combine row``: every baseline's rows located by their own errors (``Panel.row_errors``), as ``landfall
    score --combine row`` gives them: on NAB 014 each detector's VUS-PR moves (its rows are other scores), and the
    mean window's row scores are each row's squared distance from the mean window's rows, averaged."""
    import argparse

    from landfall_bench.detect import located
    from trainer.judging import baselines, floor

    name = next(n for n in json.loads((protocol.dev_root() / "series.json").read_text()) if n.startswith("014_"))
    data = protocol.dev_series(name)
    runs = {c: protocol.run_series(name, data, argparse.Namespace(seeds=1, options=[], epochs=1, combine=c, half=""),
                                   tmp_path / c) for c in ("mean", "row")}
    for base in baselines.NAMES:
        mean, row = (runs[c]["baselines"][base][0]["vus_pr"] for c in ("mean", "row"))
        if baselines.unit_of(baselines.KINDS.get(base)) is not None:  # its own unit, whatever the dataset's
            assert row == pytest.approx(mean, abs=1e-12), base
            continue
        assert 0.0 < row <= 1.0 and row != pytest.approx(mean, abs=1e-6), base
    values = data["values"].astype(np.float64)
    window = np.full((4, 1), 0.5)
    mean_window = floor.MeanWindow()
    mean_window.add(np.broadcast_to(window, (3, 4, 1)).astype(np.float32))
    scores = located(mean_window.row_errors, values[:40], 4, "row")
    steps = (values[:40, 0] - 0.5) ** 2
    np.testing.assert_allclose(scores, steps, rtol=1e-9)  # the same row of every window: its own error, unaveraged



def test_the_goals_of_issue_55_are_each_said_met_or_not_with_the_shortfall():
    """``protocol.goals`` (made-up medians, two series, one option): the champion under in-run nearest neighbour on one
    series is named with its shortfall; the means against TSB-AD-M's best; the model against the published
    AutoEncoder (all but one wanted); and a series where the model is the labelled best but not the champion."""
    def series(name: str, champs: list[float], models: list[float], base: dict, pub: dict) -> dict:
        return {"series": name, "set": protocol.MULTIVARIATE, "published": pub,
                "baselines": {b: [{"vus_pr": v}, {"vus_pr": v}] for b, v in base.items()},
                "runs": {"default": [{"champion": {"vus_pr": c}, "model": {"vus_pr": m}}
                                     for c, m in zip(champs, models, strict=True)]}}

    a = series("066_SMD_id_10_Facility_tr_2634_1st_2734", [0.2, 0.3], [0.4, 0.4],
               {"pca": 0.1, "nearest_neighbour": 0.33, "mean_window": 0.3}, {"OCSVM": 0.649, "AutoEncoder": 0.5})
    b = series("002_MSL_id_1_Sensor_tr_500_1st_900", [0.9, 1.0], [0.5, 0.7],
               {"pca": 0.95, "nearest_neighbour": 0.9}, {"KMeansAD": 0.99, "AutoEncoder": 0.4})
    said = protocol.goals([a, b])
    assert said[0] == "Issue #55's goals, option default, 2 series (medians over the seeds):"
    assert said[1] == ("- the champion >= the better of in-run PCA and nearest neighbour: 1 of 2: NOT met "
                       "(short: 066_SMD 0.080)")
    assert said[2] == "- the champion's mean 0.600 >= TSB-AD-M's best per series, mean 0.820: NOT met (0.220 short)"
    assert said[3] == "- the model >= TSB-AD-M's AutoEncoder: 1 of 2: met"
    assert said[4] == ("- the champion >= the model where the model is the labelled best: NOT met on 066_SMD "
                       "(model 0.400, champion 0.250)")
    b["runs"]["default"] = [{"champion": {"vus_pr": 1.0}, "model": {"vus_pr": 0.3}}] * 2
    a["runs"]["default"] = [{"champion": {"vus_pr": 0.4}, "model": {"vus_pr": 0.4}}] * 2
    said = protocol.goals([a, b])
    assert said[1].endswith("2 of 2: met") and said[4].endswith("labelled best: met")
    assert said[3] == "- the model >= TSB-AD-M's AutoEncoder: 0 of 2: NOT met (all but one wanted)"
    a["runs"], b["runs"] = {}, {}
    assert protocol.goals([a, b]) == []  # --baselines-only: no champion, no goal
    nab = [{"series": n, "set": "univariate", "published": {"Sub-PCA": sub}, "baselines": {},
            "runs": {"default": [{"champion": {"vus_pr": c}} for c in champs]}}
           for n, sub, champs in (("008", 0.3, [0.5, 0.7, 0.6]), ("009", 0.2, [0.1, 0.0, 0.2]))]
    assert protocol.goals(nab) == ["Issue #55's goal, option default, the univariate 2: the champion's mean 0.350 >= "
                                   "TSB-AD's Sub-PCA mean 0.250: met"]
    nab[0]["runs"]["default"] = [{"champion": {"vus_pr": 0.2}}]
    assert protocol.goals(nab)[0].endswith("mean 0.150 >= TSB-AD's Sub-PCA mean 0.250: NOT met (0.100 short)")


def test_half_judges_the_second_half_and_gives_the_first_as_a_labelled_recording(tmp_path):
    """``--half``: series with labelled rows in both halves of the rows after the prefix are judged on the second half
    only, and (``labelled``) the first half's rows and labels are stored as the dataset's labelled recording that the
    trainer cuts into its windows; series with every anomaly in one half are left out (``halves`` None)."""
    import argparse

    from landfall.core.artifacts import labelled
    from landfall.core.services.storage import Storage
    from trainer.judging import labelled_check

    names = json.loads((protocol.dev_root() / "series.json").read_text())
    name = next(n for n in names if n.startswith("018_"))
    data = protocol.dev_series(name)
    labels, n_train = data["labels"], data["train_rows"]
    mid = protocol.halves(labels, n_train)
    assert mid == n_train + (len(labels) - n_train) // 2 and labels[n_train:mid].any() and labels[mid:].any()
    for other in (n for n in names if n.startswith("014_")):  # all its anomalies in one half
        assert protocol.halves(protocol.dev_series(other)["labels"], protocol.dev_series(other)["train_rows"]) is None
    runs = {h: protocol.run_series(name, data, argparse.Namespace(seeds=1, options=[], epochs=1, combine="mean",
                                                                   half=h), tmp_path / (h or "all"))
            for h in ("", protocol.LABELLED_HALF)}
    assert runs[""]["judged_from"] == 0 and runs[protocol.LABELLED_HALF]["judged_from"] == mid
    assert runs[""]["baselines"]["pca"][0] != runs[protocol.LABELLED_HALF]["baselines"]["pca"][0]
    uri = protocol.labelled_recording(tmp_path, name, data["values"], labels, n_train, mid)
    found = labelled.read(Storage(), uri)
    assert isinstance(found, labelled.LabelledRecording)
    np.testing.assert_array_equal(found.rows, data["values"][n_train:mid].astype(np.float32))
    np.testing.assert_array_equal(found.labels, labels[n_train:mid])
    cut = labelled_check.load(Storage(), uri, runs[""]["window"])
    assert cut.instances.shape[1:] == (runs[""]["window"], 1) and 0 < cut.positives < cut.count
