"""Labelled evaluation files (landfall.arrival.labelled_file): BasicMotions, standing as normal, the other activities
anomalous, written in every format the converter reads, and each way labels can be wrong."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import labelled_file
from landfall.arrival.config import ConverterConfig
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage
from landfall_bench import realdata

CFG = ConverterConfig(timesteps=100, features=6)


@pytest.fixture(scope="module")
def motions():
    x, activity = realdata.basic_motions("test")
    return x, (activity != "Standing").astype(np.int64)  # 10 standing (normal), 30 others (anomalous)


def _frame(x, y) -> pd.DataFrame:
    df = pd.DataFrame(x.reshape(len(x), -1), columns=[f"v{i}" for i in range(x.shape[1] * x.shape[2])])
    df.insert(7, "label", y)  # anywhere among the columns
    return df


def _write(tmp_path: Path, fmt: str, x, y) -> Path:
    path = tmp_path / f"set.{fmt}"
    if fmt == "npz":
        np.savez_compressed(path, instances=x, label=y)
    elif fmt == "csv":
        _frame(x, y).to_csv(path)  # with pandas' row index
    elif fmt == "csv.gz":
        with gzip.open(path, "wt", newline="") as f:
            f.write("\ufeff")  # Excel's BOM
            _frame(x, y).to_csv(f, index=False, lineterminator="\r\n")
    elif fmt == "parquet":
        _frame(x, y).to_parquet(path)
    elif fmt == "indexed.parquet":  # a shuffled frame: pandas stores its row labels as __index_level_0__
        path = tmp_path / "set.parquet"
        _frame(x, y).sample(frac=1.0, random_state=0).sort_index().to_parquet(path)  # same order
        assert "__index_level_0__" in pq.read_schema(path).names
    elif fmt == "list.parquet":
        path = tmp_path / "set.parquet"
        values = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), x.shape[1] * x.shape[2])
        pq.write_table(pa.table({"window": values, "anomaly": pa.array(y.astype(bool))}), path)
    return path


@pytest.mark.parametrize("fmt", ["npz", "csv", "csv.gz", "parquet", "indexed.parquet", "list.parquet"])
def test_every_converter_format_reads_back_exactly(tmp_path, motions, fmt):
    x, y = motions
    path = _write(tmp_path, fmt, x, y)
    got = labelled_file.load(Storage(), str(path), CFG, "anomaly" if fmt == "list.parquet" else "label")
    assert got.instances.shape == (40, 100, 6) and got.instances.dtype == np.float32
    np.testing.assert_array_equal(got.instances, x)  # CSV's decimal text parses to the same float32
    np.testing.assert_array_equal(got.labels, y)
    assert got.labels.dtype == np.uint8 and got.positives == 30


@pytest.mark.parametrize(("labels", "reason", "says"), [
    (lambda y: y[:-1], "label_length", "39 labels for 40 instances"),
    (lambda y: np.where(y == 1, 2, 0), "label_values", "neither 0 nor 1"),
    (lambda y: np.where(np.arange(40) == 5, 0.5, y), "label_values", "label 5 (0-based) = 0.5"),
    (lambda y: np.zeros(40), "no_positives", "all 40 labels are 0"),
    (lambda y: np.ones(40, bool), "no_negatives", "all 40 labels are 1"),
    (lambda y: np.where(np.arange(40) == 3, np.nan, y), "non_finite", "label 3 (0-based)"),
])
def test_bad_labels_are_refused_with_one_clear_line(tmp_path, motions, labels, reason, says):
    x, y = motions
    np.savez(tmp_path / "bad.npz", x=x, label=labels(y))
    with pytest.raises(BadInput) as err:
        labelled_file.load(Storage(), str(tmp_path / "bad.npz"), CFG)
    assert err.value.reason == reason and says in str(err.value) and "\n" not in str(err.value)


def test_a_missing_label_in_a_csv_is_a_missing_value(tmp_path, motions):
    x, y = motions
    df = _frame(x, y.astype(float))
    df.loc[12, "label"] = np.nan
    df.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(BadInput, match="non_finite: label 12"):
        labelled_file.load(Storage(), str(tmp_path / "s.csv"), CFG)


@pytest.mark.parametrize(("write", "reason"), [
    (lambda p, x, y: np.save(p.with_suffix(".npy"), x), "unsupported_format"),
    (lambda p, x, y: np.savez(p.with_suffix(".npz"), x=x, y=y), "no_label"),
    (lambda p, x, y: np.savez(p.with_suffix(".npz"), x=x, z=x, label=y), "npz_several_arrays"),
    (lambda p, x, y: np.savez(p.with_suffix(".npz"), x=x[:, :50], label=y), "shape_mismatch"),
    (lambda p, x, y: _frame(x, y).rename(columns={"label": "y"}).to_csv(p.with_suffix(".csv")), "no_label"),
    (lambda p, x, y: _frame(x[:, :, :5], y).to_csv(p.with_suffix(".csv"), index=False), "wrong_column_count"),
    (lambda p, x, y: _frame(x, y).assign(v3="x").to_csv(p.with_suffix(".csv"), index=False), "non_numeric"),
    (lambda p, x, y: _frame(x, y).assign(label="yes").to_parquet(p.with_suffix(".parquet")), "bad_dtype"),
])
def test_files_that_are_not_a_labelled_set_name_the_reason(tmp_path, motions, write, reason):
    x, y = motions
    write(tmp_path / "f", x, y)
    (path,) = tmp_path.glob("f.*")
    with pytest.raises(BadInput) as err:
        labelled_file.load(Storage(), str(path), CFG)
    assert err.value.reason == reason, err.value


def test_a_file_over_the_size_bound_is_refused_before_it_is_read(tmp_path, monkeypatch, motions):
    x, y = motions
    path = _write(tmp_path, "npz", x, y)
    monkeypatch.setattr(labelled_file, "MAX_BYTES", path.stat().st_size - 1)
    with pytest.raises(BadInput, match=r"too_large: .* more than a labelled evaluation file may have"):
        labelled_file.load(Storage(), str(path), CFG)


def test_non_finite_instance_values_are_refused(tmp_path, motions):
    x, y = motions
    x = x.copy()
    x[4, 10, 2] = np.nan
    np.savez(tmp_path / "s.npz", x=x, label=y)
    with pytest.raises(BadInput, match=r"non_finite: 1 instances .* instance 4"):
        labelled_file.load(Storage(), str(tmp_path / "s.npz"), CFG)
