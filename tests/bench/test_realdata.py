"""The shipped real series (bench/data/README.md states the facts checked here)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from landfall_bench import realdata


@pytest.mark.parametrize("split", ["train", "test"])
def test_basic_motions_has_forty_instances_ten_per_activity(split):
    x, y = realdata.basic_motions(split)
    assert x.shape == (40, 100, 6) and x.dtype == np.float32
    assert Counter(y.tolist()) == {name: 10 for name in realdata.BASIC_MOTIONS_CLASSES}
    assert np.isfinite(x).all()


def test_basic_motions_keeps_timesteps_on_axis_one():
    x, y = realdata.basic_motions("train")
    # the file's first line: dimension 0 starts 0.079106,0.079106,-0.903497; the label is Standing
    np.testing.assert_array_equal(x[0, :3, 0], np.float32([0.079106, 0.079106, -0.903497]))
    assert y[0] == "Standing"
    # the splits differ (not the same file read twice)
    assert not np.array_equal(x, realdata.basic_motions("test")[0])


def test_basic_motions_refuses_an_unknown_split():
    with pytest.raises(ValueError, match="split must be"):
        realdata.basic_motions("validation")


def test_daphnet_is_seven_thousand_rows_of_nine_channels_at_64_hz():
    stamps, values, labels = realdata.daphnet()
    assert values.shape == (7040, 9) and values.dtype == np.float32
    assert labels.shape == (7040,) and labels.dtype == np.uint8
    assert labels.sum() == 0  # the excerpt holds no labelled freeze (README)
    assert str(stamps[0]) == "1970-01-01T00:04:40.000" and str(stamps[-1]) == "1970-01-01T00:06:29.984"
    steps = np.diff(stamps).astype(np.int64)
    assert steps.min() > 0 and 15 <= steps.mean() <= 16.5  # ms: 64 Hz
    np.testing.assert_array_equal(values[0], np.float32([101, 1000, 297, -9, 953, 303, 330, 942, -145]))


def test_sliding_windows_cuts_every_stride_rows():
    series = np.arange(20, dtype=np.float32).reshape(10, 2)
    w = realdata.sliding_windows(series, 4, 3)
    assert w.shape == (3, 4, 2)  # starts 0, 3, 6
    np.testing.assert_array_equal(w[1], series[3:7])
    w[0, 0, 0] = -1  # a copy: the series is untouched
    assert series[0, 0] == 0
    assert realdata.sliding_windows(series, 11).shape == (0, 11, 2)
    assert realdata.sliding_windows(series, 10, 1).shape == (1, 10, 2)
    with pytest.raises(ValueError, match="width and stride"):
        realdata.sliding_windows(series, 0)


def test_read_ts_names_a_ragged_line(tmp_path: Path):
    bad = tmp_path / "bad.ts"
    bad.write_text("@problemName x\n@data\n1,2,3:4,5,6:a\n1,2:3,4,5:b\n")
    with pytest.raises(ValueError, match=r"bad.ts:4: dimensions of different lengths"):
        realdata.read_ts(bad)


def test_the_labelled_series_are_what_their_sources_say():
    """Known facts of the labelled series (bench/data/README.md): sizes, and where the labelled anomalies are."""
    for name, (train, test, anomalies) in {"kdd135": (1200, 6301, [(2987, 2999)]),
                                          "ecg3": (10000, 10000, [(1560, 1660), (6600, 6700), (6940, 7040)]),
                                          "basic_motions": (1000, 1200, [(300, 400), (800, 900)])}.items():
        x_train, x_test, labels = realdata.labelled_series(name)
        assert (len(x_train), len(x_test), len(labels)) == (train, test, test), name
        edges = np.flatnonzero(np.diff(np.r_[0, labels, 0])).reshape(-1, 2).tolist()
        assert [tuple(e) for e in edges] == anomalies, name
    with pytest.raises(ValueError, match="not one of"):
        realdata.labelled_series("nab")


def test_the_readme_records_each_file_and_its_digest():
    readme = (realdata.DATA / "README.md").read_text()
    digests = dict(re.findall(r"\| `([^`]+)` \| `([0-9a-f]{64})` \|", readme))
    files = {p.name for p in realdata.DATA.iterdir() if p.suffix in (".ts", ".csv")}
    files |= {f"nab-dev/{p.name}" for p in (realdata.DATA / "nab-dev").iterdir()}  # the NAB dev set, every file
    files |= {f"multivariate-dev/{p.name}" for p in (realdata.DATA / "multivariate-dev").iterdir()}  # MSL (#55)
    assert set(digests) == files == {"BasicMotions_TRAIN.ts", "BasicMotions_TEST.ts", "S06R02E0.csv",
                                     "135_UCR_Anomaly_InternalBleeding16_TRAIN.csv",
                                     "135_UCR_Anomaly_InternalBleeding16_TEST.csv",
                                     "ecg-diff-count-3_TRAIN_NA.csv", "ecg-diff-count-3_TEST.csv",
                                     *(f"nab-dev/{n}" for n in ("README.md", "series.json", "TravelTime_451.csv",
                                                                "Twitter_volume_FB.csv",
                                                                "art_increase_spike_density.csv",
                                                                "art_load_balancer_spikes.csv",
                                                                "exchange-3_cpm_results.csv",
                                                                "rogue_agent_key_hold.csv")),
                                     *(f"multivariate-dev/{n}" for n in ("README.md", "series.json",
                                                                         "002_MSL_id_1_Sensor_tr_500_1st_900.csv"))}
    for name, digest in digests.items():
        assert hashlib.sha256((realdata.DATA / name).read_bytes()).hexdigest() == digest
