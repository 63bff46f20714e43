"""The baselines as servable detectors (trainer.judging.detectors) and the surrogate set (trainer.judging.surrogate)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from landfall.core.scoring import Scorer
from landfall.core.services.storage import Storage
from trainer.judging import baselines, detectors, surrogate


def _sines(n: int, t: int = 24, f: int = 2, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, 2 * np.pi, (n, 1, 1))
    steps = np.arange(t)[None, :, None] * 0.4
    x = np.sin(start + steps + np.arange(f)[None, None, :]) * np.array([1.0, 30.0])[:f] + np.array([0.0, 100.0])[:f]
    return (x + rng.normal(0, 0.05, x.shape)).astype(np.float32)


@pytest.fixture(scope="module")
def panel():
    x = _sines(600)
    flat = x.reshape(-1, 2)
    return baselines.Panel.fit([x[:300], x[300:]], len(x), flat.mean(0), flat.std(0), (24, 2), 4)


def _channels(n: int, t: int = 24, f: int = 5, seed: int = 0) -> np.ndarray:
    """Windows of ``f`` related channels on their own levels and scales (a sensor rig's)."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, 2 * np.pi, (n, 1, 1))
    steps = np.arange(t)[None, :, None] * 0.4
    x = np.sin(start + steps + 0.7 * np.arange(f)[None, None, :]) * (1.0 + 3.0 * np.arange(f)) + 10.0 * np.arange(f)
    return (x + rng.normal(0, 0.05, x.shape)).astype(np.float32)


OPT_IN = {importlib.import_module(m).Detector.name: importlib.import_module(m).Detector for m in baselines.OPT_IN}
EVERY = [*baselines.NAMES, *OPT_IN]  # the default candidates and the detectors that ship opt-in


@pytest.fixture(scope="module")
def wide():
    """A panel of every detector, the opt-in ones registered for it (the registry restored after)."""
    saved = dict(baselines.KINDS), list(baselines.NAMES), dict(baselines.DESCRIPTIONS)
    try:
        for kind in OPT_IN.values():
            baselines.register(kind)
        x = _channels(600)
        flat = x.reshape(-1, 5)
        yield baselines.Panel.fit([x[:300], x[300:]], len(x), flat.mean(0), flat.std(0), (24, 5), 4)
    finally:
        for registry, old in zip((baselines.KINDS, baselines.NAMES, baselines.DESCRIPTIONS), saved, strict=True):
            registry.clear()
            registry.update(old) if isinstance(registry, dict) else registry.extend(old)


@pytest.mark.parametrize("name", EVERY)
def test_a_saved_detector_scores_as_the_panel_does(wide, name, tmp_path):
    """Every detector, default or opt-in, reconstructing or scoring, serves from its SavedModel what the panel
    computes."""
    held = _channels(50, seed=1)
    held[10, 5:9, 2] += 8.0  # a few rows off their channels' shape, for the row scorers to see
    local = detectors.save(wide, name, tmp_path / name)
    scorer = Scorer.load(Storage(), str(local))
    assert scorer.shape == (24, 5)
    np.testing.assert_allclose(scorer.row_errors(held), wide.row_errors(held)[name], rtol=2e-3, atol=1e-4)
    assert scorer.scores == baselines.scores(wide.kinds.get(name))  # a scoring detector serves its row scores
    assert scorer.unit == wide.unit(name)
    assert scorer.alone == bool(getattr(wide.kinds.get(name), "alone", False))


def test_row_detectors_that_score_across_channels_apply_to_three_or_more(panel, wide):
    """A row z-scored across two channels is one of two points: those detectors are no candidate there."""
    across = {n for n, k in {**baselines.KINDS, **OPT_IN}.items() if getattr(k, "across", False)}
    assert {"ocsvm", "hbos", "knn", "cblof", "mcd_rows", "iforest"} <= across
    assert not across & set(panel.kinds) and across <= set(wide.kinds)
    assert set(wide.kinds) - across <= set(panel.kinds)


def test_an_unknown_or_unfitted_detector_is_refused(panel, tmp_path):
    with pytest.raises(ValueError, match="no detector"):
        detectors.save(panel, "lstm", tmp_path / "x")
    empty = baselines.Panel.fit([], 0, [0.0, 0.0], [1.0, 1.0], (24, 2), 4)
    with pytest.raises(ValueError, match="not fitted"):
        detectors.save(empty, baselines.PCA, tmp_path / "y")


def test_the_surrogate_set_is_deterministic_balanced_and_separates_what_it_should(panel):
    held = _sines(140, seed=2)
    seed = surrogate.seed_of(42, ["b-arrival", "a-arrival"])
    assert seed == surrogate.seed_of(42, ["a-arrival", "b-arrival"]) != surrogate.seed_of(43, ["a-arrival"])
    one, two = surrogate.build([held[:70], held[70:]], panel.std, seed), surrogate.build([held], panel.std, seed)
    assert one is not None and two is not None
    np.testing.assert_array_equal(one.instances, two.instances)
    assert one.labels.sum() == 140 == len(one.labels) // 2 and set(one.kinds) == set(surrogate.KINDS)
    np.testing.assert_array_equal(one.instances[:140], held)  # the clean half is the held-out windows, as they are
    changed = np.abs(one.instances[140:] - held).reshape(140, -1).max(axis=1)
    flat_kind = np.array(one.kinds) == "flat"
    assert (changed[~flat_kind] > 0).all()  # every twin but a flat run (which may copy a flat stretch) differs
    # The nearest neighbour tells the twins apart on a clean periodic signal; a detector that scores every window
    # alike cannot (AP 0.5, what a coin gives the balanced set).
    near = one.figures(panel.errors(one.instances)[baselines.NEAREST])
    assert near["average_precision"] > 0.8 and set(near["by_kind"]) == set(surrogate.KINDS)
    assert near[surrogate.KIND_AP] == pytest.approx(np.mean(list(near["by_kind"].values())), abs=1e-3)
    alike = one.figures(np.ones(280))
    assert alike["average_precision"] == pytest.approx(0.5)
    # Per kind, 20 twins among the 140 clean windows: a detector that cannot tell them apart scores their share
    assert alike[surrogate.KIND_AP] == pytest.approx(20 / 160)
    assert surrogate.build([], panel.std, seed) is None


def test_the_choice_is_the_best_candidate_that_may_be_promoted_the_model_by_a_margin():
    from trainer.judging import selection

    scores = {"model": 0.90, "nearest_neighbour": 0.87, "pca": 0.70, "mean_window": 0.50}
    # Without the margin the model leads; by 0.05 it must lead the nearest neighbour by more than 0.03.
    assert selection.choose(scores, selection.SURROGATE, lambda n: None).chosen == "model"
    margined = selection.choose(scores, selection.SURROGATE, lambda n: None, model_margin=0.05)
    assert margined.chosen == "nearest_neighbour" and margined.order == ("nearest_neighbour", "model", "pca",
                                                                          "mean_window")
    clear = selection.choose({**scores, "model": 0.95}, selection.SURROGATE, lambda n: None, model_margin=0.05)
    assert clear.chosen == "model"
    # A refused candidate is passed over, with its reason in the verdict's why; none may: None.
    refused = selection.choose({**scores, "model": 0.99}, selection.SURROGATE,
                               lambda n: "skill 0.02 is below min_skill 0.1" if n == "model" else None, 0.05)
    assert refused.chosen == "nearest_neighbour" and "model (skill 0.02" in refused.why()
    assert selection.choose(scores, selection.SURROGATE, lambda n: "refused").chosen is None
    # Ties go to the simpler candidate.
    assert selection.choose({"model": 0.8, "pca": 0.8, "nearest_neighbour": 0.8}, selection.SURROGATE,
                            lambda n: None).chosen == "pca"


def test_the_specs_schema_says_the_model_margins_default():
    """The dataset spec's schema repeats the model margin's default in words; it is the trainer's (it said 0.05)."""
    import dataclasses
    import json
    import re
    from pathlib import Path

    from trainer.config import TrainerConfig

    schema = (Path(__file__).resolve().parents[2] / "functions" / "landfall" / "core" / "artifacts"
              / "dataset-v1.schema.json").read_text()
    (described,) = re.findall(r'"model_margin": \{[^}]*"description": ("[^"]*")', schema)
    (said,) = re.findall(r"default ([0-9.]+)", json.loads(described))
    default = {f.name: f.default for f in dataclasses.fields(TrainerConfig)}["model_margin"]
    assert float(said) == default


def test_the_served_error_is_in_the_jobs_scale_and_a_model_saved_without_one_keeps_original_units(panel, tmp_path):
    import json

    held = _sines(50, seed=1)
    local = detectors.save(panel, baselines.PCA, tmp_path / "pca")
    norm = json.loads((local / "normalization.json").read_text())
    np.testing.assert_allclose(norm["error_scale"], panel.scale)
    scorer = Scorer.load(Storage(), str(local))
    assert scorer.metric == "mse_standardised"
    np.testing.assert_allclose(scorer.scale, panel.scale)
    # The second channel's spread is 30x the first's: in original units it alone decides the error.
    in_original = scorer.measured_in(None)
    assert in_original.metric == "mse_original_units"
    ratio = in_original.errors(held) / scorer.errors(held)
    assert ratio.min() > 1.0 and not np.allclose(ratio, ratio[0])  # not one factor: the weights differ by channel
    # A model saved before error_scale existed is served as it was: original units.
    del norm["error_scale"]
    (local / "normalization.json").write_text(json.dumps(norm))
    legacy = Scorer.load(Storage(), str(local))
    assert legacy.scale is None and legacy.metric == "mse_original_units"
    np.testing.assert_allclose(legacy.errors(held), in_original.errors(held), rtol=1e-6)


@pytest.mark.parametrize("kind", surrogate.KINDS)
def test_an_injected_anomaly_moves_up_to_a_quarter_of_the_channels_together(kind):
    """On a recording of many channels an anomaly moves several correlated channels at once (issue #55): each twin
    changes 1..ceil(channels/4) of the channels that vary, all over the same run of steps; a constant channel is
    never touched; one channel, the set is what it was (no extra draw)."""
    rng = np.random.default_rng(7)
    t_len, features = 40, 24
    window = rng.normal(0, 1, (t_len, features)).astype(np.float32)
    window[:, 5] = 3.0  # constant: not a candidate
    varying = np.flatnonzero(window.max(axis=0) > window.min(axis=0))
    counts = []
    for i in range(200):
        twin = surrogate.inject(window, kind, np.ones(features), np.random.default_rng(i), varying)
        moved = np.flatnonzero(np.abs(twin - window).max(axis=0) > 0)
        assert 5 not in moved and len(moved) <= int(np.ceil(surrogate.MAX_CHANNEL_SHARE * len(varying)))
        if kind in ("level_shift", "variance", "trend") and len(moved) > 1:
            rows = [set(np.flatnonzero(np.abs(twin[:, f] - window[:, f]) > 0)) for f in moved]
            assert len({min(r) for r in rows}) == 1  # one run, one start
        counts.append(len(moved))
    if kind in ("level_shift", "variance", "trend", "spike"):  # these change every channel they are put in
        assert min(counts) >= 1 and max(counts) > 1
    # One channel: the draws are the single-channel injection's, so a univariate set does not change.
    one = window[:, :1]
    a = surrogate.inject(one, kind, np.ones(1), np.random.default_rng(3), np.array([0]))
    b = surrogate.inject(one, kind, np.ones(1), np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)



@pytest.mark.parametrize("doc", ["[1, 2]", "null", '"x"', '{"normalized": true, "shape": 3}',
                                 '{"normalized": true, "shape": [24, 5], "mean": "high", "std": [1, 1, 1, 1, 1]}'])
def test_a_served_folder_whose_normalization_is_json_of_another_type_is_refused_in_one_line(wide, doc, tmp_path):
    """``normalization.json`` as valid JSON of the wrong type (the record, or one of its fields): ``Invalid`` naming
    the model and the file, never a crash."""
    import json

    from landfall.core.errors import Invalid

    local = detectors.save(wide, "pca_rows", tmp_path / "pca_rows")
    (local / "normalization.json").write_text(doc)
    with pytest.raises(Invalid, match=r"normalization\.json (is a JSON|is not a model's)") as found:
        Scorer.load(Storage(), str(local))
    assert str(local) in str(found.value) and "\n" not in str(found.value)
    # A unit or alone of another type is no unit: the detector is served in the dataset's, row by window
    good = json.loads((detectors.save(wide, "pca_rows", tmp_path / "again") / "normalization.json").read_text())
    (tmp_path / "again" / "normalization.json").write_text(json.dumps({**good, "unit": ["row"], "alone": "yes"}))
    odd = Scorer.load(Storage(), str(tmp_path / "again"))
    assert odd.unit is None and odd.alone is False and odd.scores
