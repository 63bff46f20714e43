"""``landfall bench published`` (landfall_bench.published, issue #66): each detector with a row in TSB-AD-M's
published table, fitted as TSB-AD fits it, against that row, on the shipped MSL recording."""

from __future__ import annotations

import json

from landfall_bench import protocol, published
from trainer.judging import baselines


def test_each_detector_is_the_one_tsb_ad_published_on_the_shipped_msl(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LANDFALL_MV_DEV", str(protocol.MV_DEV))
    assert published.main(["--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())
    found = {r["detector"]: r for r in rows}
    # Every detector that has a published row, default or opt-in, is measured (one shipped recording).
    assert {"pca_rows", "kmeans_znorm", "ocsvm", "hbos", "knn", "cblof", "mcd_rows", "iforest"} <= set(found)
    assert {r["series"] for r in rows} == {"002_MSL_id_1_Sensor_tr_500_1st_900"}
    # The defaults and the clustering and histogram ones land on their published VUS-PR, fitted as TSB-AD fits them.
    for name in ("pca_rows", "kmeans_znorm", "cblof", "hbos", "mcd_rows"):
        assert abs(found[name]["as_tsb_ad"] - found[name]["published"]) <= 0.03, found[name]
    assert found["kmeans_znorm"]["published"] > 0.99 and found["kmeans_znorm"]["history_only"] > 0.99
    assert all(0.0 <= r["history_only"] <= 1.0 for r in rows)
    assert set(baselines.NAMES) >= {"pca_rows", "kmeans_znorm"}  # the two that are default candidates
    table = (tmp_path / "table.md").read_text()
    assert "| pca_rows | 1 of 1 |" in table and "| kmeans_znorm | 1 of 1 |" in table
    assert table in capsys.readouterr().out
