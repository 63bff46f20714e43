"""Series datasets in the spec (shape.window + arrival.series) and the window arithmetic of
landfall.core.rules.series_windows."""

from __future__ import annotations

import numpy as np
import pytest

from landfall.core.artifacts import specs
from landfall.core.errors import Invalid
from landfall.core.rules import series_windows
from trainer.config import TrainerConfig
from trainer.task import parse_config


def _doc(**over):
    doc = {"apiVersion": specs.API_VERSION, "name": "pump",
           "shape": {"window": {"length": 64, "stride": 4}},
           "arrival": {"series": {"time_column": "timestamp", "channels": ["a", "b", "c"], "max_gap": 2.5}}}
    doc.update(over)
    return doc


def test_a_series_spec_sets_the_converter_and_the_trainer():
    spec = specs.DatasetSpec.from_document(specs.validate(_doc(), "pump.yaml"), 3)
    assert spec.series
    fields = spec.converter_fields()
    assert fields["timesteps"] == 64 and fields["window_stride"] == 4 and fields["features"] == 3
    assert fields["series_time_column"] == "timestamp" and fields["series_channels"] == ("a", "b", "c")
    assert fields["series_max_gap"] == 2.5
    args = spec.trainer_args()
    assert args[args.index("--timesteps") + 1] == "64" and args[args.index("--features") + 1] == "3"
    assert args[args.index("--holdout") + 1] == "segment"
    # No model block: the series model (specs.SERIES_MODEL), parsed by the trainer as the dense autoencoder, no dropout.
    cfg = parse_config(["--inputs", "gs://b/runs/j/inputs.json", "--job-dir", "gs://b/runs/j", *args], env={})
    assert (cfg.model_kind, cfg.dropout, cfg.units) == ("dense", 0.0, (128, 32))
    # A spec that names the model keeps it; a GRU named without dropout keeps the GRU's own default.
    gru = specs.DatasetSpec.from_document(specs.validate(_doc(model={"kind": "gru"}), "pump.yaml"), 3)
    cfg = parse_config(["--inputs", "i.json", "--job-dir", "j", *gru.trainer_args()], env={})
    assert (cfg.model_kind, cfg.dropout) == ("gru", TrainerConfig().dropout)
    dropped = specs.DatasetSpec.from_document(specs.validate(_doc(model={"dropout": 0.3}), "pump.yaml"), 3)
    cfg = parse_config(["--inputs", "i.json", "--job-dir", "j", *dropped.trainer_args()], env={})
    assert (cfg.model_kind, cfg.dropout) == ("dense", 0.3)
    # How the rows are scored reaches the verdict, which chooses for it (trainer.judging.selection.basis); unset, mean.
    assert "--combine" not in args and cfg.combine == series_windows.MEAN
    by_rows = specs.DatasetSpec.from_document(specs.validate(
        _doc(shape={"window": {"length": 64, "stride": 4, "combine": "row"}}), "pump.yaml"), 3)
    cfg = parse_config(["--inputs", "i.json", "--job-dir", "j", *by_rows.trainer_args()], env={})
    assert by_rows.combine == cfg.combine == series_windows.ROW
    with pytest.raises(SystemExit):  # argparse: one of the rules only
        parse_config(["--inputs", "i.json", "--job-dir", "j", "--combine", "median"], env={})


def test_drop_columns_need_the_channel_count():
    doc = _doc(arrival={"series": {"time_column": "t", "drop_columns": ["label"]}})
    with pytest.raises(Invalid, match=r"shape\.features \(series\): the channel count is needed"):
        specs.validate(doc, "pump.yaml")
    doc["shape"]["features"] = 9
    spec = specs.DatasetSpec.from_document(specs.validate(doc, "pump.yaml"), 1)
    assert spec.converter_fields()["series_drop_columns"] == ("label",)
    assert "--features" in spec.trainer_args()


@pytest.mark.parametrize("change, message", [
    ({"shape": {"window": {"length": 8}, "timesteps": 8, "features": 3}}, "window.length"),
    ({"training": {"holdout": "random"}}, "blocks hold-out"),
    ({"shape": {"window": {"length": 8}, "features": 2}}, "lists 3 channels"),
    ({"arrival": {}}, "go together"),
    ({"arrival": {"series": {"time_column": "t", "channels": ["a"], "drop_columns": ["b"]}}}, "should not be valid"),
    ({"shape": {"window": {"length": 8, "stride": 0}}}, "minimum"),
])
def test_inconsistent_series_specs_are_refused(change, message):
    with pytest.raises(Invalid, match=message):
        specs.validate(_doc(**change), "pump.yaml")


def test_instance_specs_are_unchanged():
    doc = {"apiVersion": specs.API_VERSION, "name": "fleet", "shape": {"timesteps": 12, "features": 4}}
    spec = specs.DatasetSpec.from_document(specs.validate(doc, "fleet.yaml"), 1)
    assert not spec.series and "--holdout" not in spec.trainer_args() and "--model-kind" not in spec.trainer_args()
    assert spec.converter_fields() == {"timesteps": 12, "features": 4, "spec_generation": 1}


def test_window_starts_follow_the_segments():
    length, stride = 5, 2
    segs = (series_windows.Segment(0, 9, series_windows.windows_in(9, length, stride), 0.0, 8.0),    # 3 windows
            series_windows.Segment(9, 5, series_windows.windows_in(5, length, stride), 20.0, 24.0))  # 1 window
    layout = series_windows.Layout(length, stride, segs)
    assert layout.windows == 4
    assert layout.starts([0, 1, 2, 3]).tolist() == [0, 2, 4, 9]
    assert series_windows.windows_in(np.array([4, 5, 6, 7]), length, stride).tolist() == [0, 1, 1, 2]
    good = {"stride": stride, "segments": [s.to_list() for s in segs]}
    assert series_windows.check(good, [length, 3], 4, "m") is None
    assert "count says 5" in series_windows.check(good, [length, 3], 5, "m")
