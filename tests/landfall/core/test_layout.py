from __future__ import annotations

import pytest

from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.errors import BadInput

L = Layout()


def test_ids_are_deterministic_and_distinct_per_generation():
    a = layout.arrival_id("incoming/ds/x.csv", 1)
    assert a == layout.arrival_id("incoming/ds/x.csv", 1)
    assert a != layout.arrival_id("incoming/ds/x.csv", 2)
    assert layout.request_id("b", "incoming/ds/x.csv", 1) != layout.request_id("b", "incoming/ds/x.csv", 2)


def test_spaces_and_non_ascii_fold_into_a_safe_id():
    aid = layout.arrival_id("incoming/ds/mes données 1.csv", 7)
    assert aid.isascii() and " " not in aid and "/" not in aid
    assert layout.parse_arrival("b", "incoming/ds/mes données 1.csv", 7, L).dataset == "ds"


@pytest.mark.parametrize("name,reason", [
    ("incoming/ds/../x.csv", "bad_object_name"),
    ("incoming/../x.csv", "bad_object_name"),
    ("incoming/x.csv", "bad_object_name"),
    ("incoming/dätä/x.csv", "bad_dataset_name"),
    ("incoming/my data/x.csv", "bad_dataset_name"),
])
def test_rejected_names(name, reason):
    with pytest.raises(BadInput) as info:
        layout.parse_arrival("b", name, 1, L)
    assert info.value.reason == reason


def test_only_incoming_objects_are_arrivals():
    assert layout.is_arrival("incoming/ds/a.npy", L)
    for name in ("tfrecords/ds/a/manifest.json", "rejected/ds/a.json", "runs/j/metrics.json", "incoming/ds/"):
        assert not layout.is_arrival(name, L)


def test_config_layers_defaults_env_flags():
    cfg = ConverterConfig.load({"LANDFALL_TIMESTEPS": "12", "LANDFALL_DROP_NONFINITE": "true"}, features=3)
    assert cfg.shape == (12, 3) and cfg.drop_nonfinite is True
    with pytest.raises(ValueError, match="LANDFALL_DROP_NONFINITE"):
        ConverterConfig.load({"LANDFALL_DROP_NONFINITE": "maybe"})


def test_tuple_settings_read_json_lists_for_items_with_commas():
    from landfall.submit.config import JobConfig

    assert JobConfig.load({"LANDFALL_TRAINER_ARGS": '["--units", "8,4"]'}).trainer_args == ("--units", "8,4")
    assert JobConfig.load({"LANDFALL_TRAINER_ARGS": "--verbose,0"}).trainer_args == ("--verbose", "0")
