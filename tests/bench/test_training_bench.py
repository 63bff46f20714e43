"""``landfall bench train``'s side-by-side training comparison (``landfall_bench.training``, issue #50) runs every
contender for real on a small dataset: this checks the bench, not the speed (its figures: docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import json

import numpy as np

from landfall.arrival.config import ConverterConfig
from landfall.arrival.converter import convert
from landfall.core.services.storage import Storage
from landfall_bench import training
from tests.trainer.helpers import make_array


def test_every_contender_trains_and_the_ratios_are_the_medians(tmp_path, capsys):
    np.save(tmp_path / "a.npy", make_array(512, seed=1))
    convert(str(tmp_path / "a.npy"), str(tmp_path / "tfrecords"), "bench", ConverterConfig.load({}), Storage())
    args = argparse.Namespace(epochs=2, batch_size=64, units=[4, 2], model_kind="dense", dropout=0.0,
                              shuffle_buffer=512, train_rounds=1, train_flags=[])
    out = training.compare(args, tmp_path / "a.npy", str(tmp_path / "tfrecords" / "manifest.json"))
    json.dumps(out)  # what --json writes
    med = out["examples_per_s"]
    assert set(med) == set(training.CONTENDERS) and all(v > 0 for v in med.values())
    # The strategy each Landfall job recorded in its metrics.json: one worker pays no multi-worker tax.
    assert out["strategies"] == {"landfall_1": "default", "landfall_2": "multi_worker_mirrored"}
    (one,), (two,), (plain,) = out["rounds"]["landfall_1"], out["rounds"]["landfall_2"], out["rounds"]["plain_default"]
    assert out["ratios_to_plain_default"]["landfall_1"] == round(one["examples_per_s"] / plain["examples_per_s"], 3)
    assert out["scaling_efficiency_1_to_2"] == round(two["examples_per_s"] / (2 * one["examples_per_s"]), 3)
    assert out["landfall_2_per_worker"] == round(med["landfall_2"] / 2, 1)
    # Two workers each train on half the instances: half the steps of one worker's epoch.
    assert two["steps_per_epoch"] == one["steps_per_epoch"] // 2 == 512 // 64 // 2
    training.report(out, "CPU")
    shown = capsys.readouterr().out
    assert "plain Keras, MWMS with one worker" in shown and "scaling efficiency 1 -> 2 workers" in shown
