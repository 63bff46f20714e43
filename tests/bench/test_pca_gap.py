"""``landfall bench pca-gap`` (landfall_bench.pca_gap, issue #55): today's PCA reimplemented exactly, each suspect
changed alone, on real series."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from landfall_bench import pca_gap, protocol


def test_each_variant_changes_its_suspects_only():
    today = pca_gap.Recipe()
    fields = {field for field, _, _ in pca_gap.SUSPECTS.values()}
    assert fields | {"cap"} == {f.name for f in dataclasses.fields(today)}
    for label, recipe in pca_gap.variants().items():
        changed = {f for f in fields if getattr(recipe, f) != getattr(today, f)}
        if label == "today":
            assert not changed
        elif label.startswith("all but"):
            assert changed == fields - {pca_gap.SUSPECTS[label[9]][0]}
        elif label.startswith("all"):
            assert changed == fields
        elif label.startswith("(d)+(c')"):
            assert changed == {"space", "constant"} and recipe.constant == pca_gap.FLOOR
        elif label.startswith("("):
            assert changed == {pca_gap.SUSPECTS[label[1]][0]}
        else:
            assert label in ("recommended: (a)+(b)+(c')+(d)+(e), k <= 256", "recommended with the hold-out",
                             "recommended, k not capped", "recommended at k 32")
            assert changed <= fields and recipe.space == "standardised" and recipe.constant == pca_gap.FLOOR
    assert pca_gap.variants()["recommended: (a)+(b)+(c')+(d)+(e), k <= 256"] == pca_gap.RECOMMENDED


def test_today_is_panels_pca_on_a_real_series():
    """NAB 008 (TSB-AD-U, window 71 > the 32 components): the reimplementation's errors are Panel's; with one channel
    the error's space only scales it, no channel is constant and the training share is under FIT_SAMPLE, so (c), (d)
    and (e) score exactly as today."""
    name = next(n for n in json.loads((protocol.dev_root() / "series.json").read_text()) if n.startswith("008_"))
    r = pca_gap.measure(name, protocol.dev_series(name), seed=0, check=True)
    assert r["window"] == 71 and r["panel_check"] < 1e-9
    vus = r["vus_pr"]
    assert all(np.isfinite(v) and 0.0 <= v <= 1.0 for v in vus.values())
    for same in ("(c) constant out", "(d) standardised", "(e) no subsample"):
        assert vus[same] == pytest.approx(vus["today"], abs=1e-12), same
    assert r["components"]["today"] == 32 and r["trained_windows"] < r["training_windows"]
    assert r["fitted_on"]["(a) no hold-out"] == r["training_windows"]


def test_the_gap_table_on_the_shipped_msl(tmp_path, monkeypatch, capsys):
    """The shipped MSL recording: 43 of 55 channels constant in its 500-row prefix, 2 of them moving later."""
    monkeypatch.setenv("LANDFALL_MV_DEV", str(protocol.MV_DEV))
    out = tmp_path / "gap.json"
    assert pca_gap.main(["--no-check", "--json", str(out)]) == 0
    (r,) = json.loads(out.read_text())
    assert (r["window"], r["training_windows"], r["trained_windows"]) == (125, 376, 213)
    assert (r["constant_channels"], r["constant_channels_varying_later"]) == (43, 2)
    assert r["components"]["today"] == 32 and r["components"]["plain 95%"] > 32
    assert all(np.isfinite(v) and 0.0 <= v <= 1.0 for v in r["vus_pr"].values())
    assert r["vus_pr"]["(e) no subsample"] == r["vus_pr"]["today"]
    table = capsys.readouterr().out
    assert "| variant | 002_MSL_id_1 |" in table and "| TSB-AD-M's PCA (published) | 0.128 |" in table
