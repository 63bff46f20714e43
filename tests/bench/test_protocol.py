"""``landfall bench detect`` (landfall_bench.protocol): the dev series cut as TSB-AD cuts them, checked against
TSB-AD's own published figures for each (its length, labelled rows and anomaly count)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from landfall_bench import protocol


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
    out = protocol.run_series(name, protocol.dev_series(name), argparse.Namespace(seeds=1, options=[], epochs=1),
                              tmp_path)
    vus = {b: f[0]["vus_pr"] for b, f in out["baselines"].items()}
    assert set(vus) == {"mean_window", "pca", "nearest_neighbour", "kmeans", protocol.ENSEMBLE}
    assert out["window"] == 23 and all(0.0 < v <= 1.0 for v in vus.values())
    assert min(vus["pca"], vus["nearest_neighbour"]) <= vus[protocol.ENSEMBLE]
    assert vus[protocol.ENSEMBLE] == pytest.approx(vus["nearest_neighbour"], abs=0.01)
    assert "| PCA+NN |" in protocol.table([out]).splitlines()[0]
