"""The stored labelled set (landfall.core.artifacts.labelled) and `landfall datasets validate|apply` with a labelled
file,
against fake-gcs-server."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from landfall.cli import main as cli
from landfall.core.artifacts import labelled, specs
from landfall.core.errors import Invalid, NotFound
from landfall.core.rules import series_windows
from landfall.core.services.storage import Storage
from landfall_bench import realdata


@pytest.fixture(scope="module")
def motions():
    x, activity = realdata.basic_motions("test")
    return x, (activity != "Standing").astype(np.uint8)


def test_the_stored_bytes_depend_only_on_the_arrays(motions):
    x, y = motions
    data = labelled.encode(x, y)
    assert labelled.encode(x.copy(), y.copy()) == data  # a content address: the same set, the same name
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:  # numpy reads it as it is
        assert set(npz.files) == {"instances", "labels"}
    xs, ys = labelled.decode(data)
    np.testing.assert_array_equal(xs, x)
    np.testing.assert_array_equal(ys, y)


def test_write_is_create_only_manifest_last_and_read_checks_the_digest(emulator_stack, bucket, motions):
    storage: Storage = emulator_stack.storage
    x, y = motions
    uri = labelled.write(storage, bucket, "motions", x, y, source="motions.npz", label="label")
    assert uri.startswith(f"gs://{bucket}/config/labelled/motions/") and uri.endswith(".npz")
    manifest = json.loads(storage.read_bytes(labelled.manifest_uri(uri)))
    assert {k: manifest[k] for k in ("schema", "count", "positives", "shape", "source")} == {
        "schema": "landfall.labelled/v1", "count": 40, "positives": 30, "shape": [100, 6], "source": "motions.npz"}
    generation = storage.stat(uri).generation
    assert labelled.write(storage, bucket, "motions", x, y, source="motions.npz", label="label") == uri
    assert storage.stat(uri).generation == generation  # nothing rewritten
    got = labelled.read(storage, uri)
    assert (got.count, got.positives) == (40, 30)
    np.testing.assert_array_equal(got.instances, x)
    # An .npz without its manifest (a crash in between) is no set; the next write commits it.
    storage.delete(labelled.manifest_uri(uri))
    with pytest.raises(NotFound):
        labelled.read(storage, uri)
    assert labelled.write(storage, bucket, "motions", x, y, source="motions.npz", label="label") == uri
    assert labelled.read(storage, uri).count == 40
    # Bytes that do not match the manifest are refused.
    storage.write_bytes(uri, labelled.encode(x, 1 - y))
    with pytest.raises(Invalid, match="sha256"):
        labelled.read(storage, uri)


def _spec(folder: Path, name: str = "motions", **labelled_entry) -> Path:
    path = folder / f"{name}.yaml"
    entry = json.dumps(labelled_entry)
    path.write_text(f"apiVersion: landfall.dataset/v1\nname: {name}\nshape: {{timesteps: 100, features: 6}}\n"
                    f"verdict: {{min_average_precision: 0.5, labelled: {entry}}}\n")
    return path


def test_apply_stores_the_set_then_the_spec_naming_it(emulator_stack, bucket, tmp_path, motions, capsys):
    storage: Storage = emulator_stack.storage
    x, y = motions
    (tmp_path / "eval").mkdir()
    np.savez(tmp_path / "eval" / "motions.npz", windows=x, anomalous=y)
    spec_file = _spec(tmp_path, file="eval/motions.npz", label="anomalous")
    assert cli(["datasets", "validate", str(spec_file)]) == 0
    assert "labelled set: 40 instances, 30 positives" in capsys.readouterr().out
    assert cli(["datasets", "apply", str(tmp_path), "--bucket", bucket]) == 0
    out = capsys.readouterr().out
    stored = specs.for_dataset(storage, bucket, "motions")
    uri = stored.verdict["labelled"]["uri"]
    assert f"labelled set {uri}: 40 instances, 30 positives" in out
    assert stored.verdict["labelled"]["file"] == "eval/motions.npz"
    np.testing.assert_array_equal(labelled.read(storage, uri).labels, y)
    # The job rendered from this generation passes the set and the gate to the trainer.
    args = stored.trainer_args()
    assert args[args.index("--labelled") + 1] == uri
    assert args[args.index("--min-average-precision") + 1] == "0.5"
    # The same file again: the same object, the same generation.
    assert cli(["datasets", "apply", str(spec_file), "--bucket", bucket]) == 0
    assert "unchanged at generation" in capsys.readouterr().out
    assert specs.for_dataset(storage, bucket, "motions").generation == stored.generation


def test_bad_labels_refuse_the_apply_with_one_line_and_write_nothing(emulator_stack, bucket, tmp_path, motions,
                                                                       capsys):
    storage: Storage = emulator_stack.storage
    x, _ = motions
    np.savez(tmp_path / "bad.npz", x=x, label=np.zeros(40))
    _spec(tmp_path, "motions", file="bad.npz")
    _spec(tmp_path, "other", file="missing.csv")
    assert cli(["datasets", "apply", str(tmp_path), "--bucket", bucket]) == 1
    err = capsys.readouterr().err
    assert "motions.yaml: verdict.labelled.file bad.npz: no_positives: all 40 labels are 0" in err
    assert "other.yaml: verdict.labelled.file missing.csv: no such file" in err
    assert storage.list(f"gs://{bucket}/config/") == []  # neither a set nor a spec
    # A reviewed spec may not name a converted set itself, nor a file outside its folder.
    for entry, says in (({"file": "bad.npz", "uri": f"gs://{bucket}/config/labelled/m/{'0' * 64}.npz"},
                         "written by `landfall datasets apply`"),
                        ({"file": "../elsewhere.csv"}, "outside the spec's folder")):
        (tmp_path / "other.yaml").unlink(missing_ok=True)
        _spec(tmp_path, "motions", **entry)
        assert cli(["datasets", "validate", str(tmp_path)]) == 1
        assert says in capsys.readouterr().err
    (tmp_path / "motions.yaml").write_text("apiVersion: landfall.dataset/v1\nname: motions\n"
                                           "verdict: {min_average_precision: 0.5}\n")
    assert cli(["datasets", "validate", str(tmp_path)]) == 1
    assert "verdict.min_average_precision gates on a labelled set" in capsys.readouterr().err


# -- a series dataset's labelled recording (landfall.arrival.labelled_recording, issue #55) -----------------------

@pytest.fixture(scope="module")
def msl() -> pd.DataFrame:
    """TSB-AD-M's MSL recording as the benchmark ships it (bench/data/multivariate-dev), written by pandas with a
    timestamp column, as a sensor export has one: 1,827 rows, 55 channels, 11 labelled anomalous."""
    from landfall_bench import protocol

    raw = pd.read_csv(next(protocol.MV_DEV.glob("002_MSL_*.csv")))
    raw.columns = [f"ch{c}" if c != "Label" else "Label" for c in raw.columns]
    raw.insert(0, "time", pd.date_range("2024-03-01", periods=len(raw), freq="min").strftime("%Y-%m-%dT%H:%M:%SZ"))
    return raw


def _series_spec(folder: Path, name: str, file: str, label: str = "Label", features: int = 55) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"apiVersion: landfall.dataset/v1\nname: {name}\n"
                    f"shape: {{features: {features}, window: {{length: auto, combine: row}}}}\n"
                    f"arrival: {{series: {{time_column: time}}}}\n"
                    f"verdict: {{labelled: {{file: {file}, label: {label}}}}}\n")
    return path


def test_a_series_datasets_labelled_file_is_a_recording_cut_into_the_jobs_windows(emulator_stack, bucket, tmp_path,
                                                                                   msl, capsys):
    storage: Storage = emulator_stack.storage
    (tmp_path / "eval").mkdir()
    msl.to_csv(tmp_path / "eval" / "msl.csv", index=False)
    spec_file = _series_spec(tmp_path, "msl", "eval/msl.csv")
    assert cli(["datasets", "validate", str(spec_file)]) == 0  # the window is auto: no length needed to check it
    assert "labelled recording: 1827 rows, 11 labelled anomalous, 1 segment(s)" in capsys.readouterr().out
    assert cli(["datasets", "apply", str(spec_file), "--bucket", bucket]) == 0
    stored = specs.for_dataset(storage, bucket, "msl")
    uri = stored.verdict["labelled"]["uri"]
    assert f"labelled recording {uri}: 1827 rows" in capsys.readouterr().out
    got = labelled.read(storage, uri)
    assert isinstance(got, labelled.LabelledRecording) and got.manifest["kind"] == labelled.RECORDING
    assert got.rows.shape == (1827, 55) and got.positives == 11 and got.starts.tolist() == [0]
    np.testing.assert_allclose(got.rows, msl.iloc[:, 1:-1].to_numpy(np.float32))
    args = stored.trainer_args()
    assert args[args.index("--labelled") + 1] == uri
    # The trainer cuts it with the job's own window: every window, each anomalous when any of its rows is.
    cut = got.windows(125)
    assert cut.instances.shape == (1827 - 124, 125, 55) and cut.manifest["windows"]["stride"] == 1
    y = msl["Label"].to_numpy()
    np.testing.assert_array_equal(cut.labels, [y[i:i + 125].max() for i in range(1827 - 124)])
    np.testing.assert_array_equal(cut.instances[700], got.rows[700:825])
    # Labelled, its jobs keep the deployment's GPUs: the verdict chooses by the labels, the model among them.
    from landfall.submit import coalesce
    from landfall.submit.config import JobConfig

    assert coalesce.with_spec(JobConfig.load({}, bucket=bucket, gpus_per_worker=1), "msl", stored).gpus_per_worker == 1


def test_a_recordings_windows_keep_to_their_segments_and_their_budget():
    rows = np.arange(200 * 2, dtype=np.float32).reshape(200, 2)
    marks = np.zeros(200, np.uint8)
    marks[[30, 150]] = 1
    starts = np.array([0, 100, 190])  # the last segment is shorter than a window: no window of it
    x, y, stride = series_windows.labelled_windows(rows, marks, starts, 20)
    assert stride == 1 and len(x) == 81 + 71 and x.shape[1:] == (20, 2)
    assert all(np.diff(w[:, 0]).max() == 2 for w in x)  # consecutive rows only: no window spans a gap
    assert y.sum() == 20 + 20  # every window over row 30 and over row 150
    small, ys, wide = series_windows.labelled_windows(rows, marks, starts, 20, max_values=40 * 20 * 2)
    assert wide == 4 and len(small) == 21 + 18 <= 40 and ys.sum() == 5 + 5
    _, _, capped = series_windows.labelled_windows(rows, marks, starts, 20, max_values=1)
    assert capped == 20  # never a stride over a window: every row stays in one
    with pytest.raises(ValueError, match="no window of 120 rows"):
        series_windows.labelled_windows(rows, marks, starts, 120)
    data = labelled.encode(rows, marks, starts)
    assert labelled.decode_recording(data)[2].tolist() == [0, 100, 190]
    with pytest.raises(Invalid, match="segment starts"):
        labelled.encode(rows, marks, np.array([5, 100]))


@pytest.mark.parametrize("change, reason", [
    (lambda d: d.assign(Label=d["Label"].where(d.index != 3, 2)), "label_values"),
    (lambda d: d.assign(Label=d["Label"].astype(float).where(d.index != 7)), "non_finite: label 7"),
    (lambda d: d.assign(Label=0), "no_positives"),
    (lambda d: d.drop(columns="Label"), "no_label"),
    (lambda d: d.assign(ch3=d["ch3"].where(d.index != 5)), "non_finite"),
    (lambda d: pd.concat([d, d.iloc[:4]], ignore_index=True), None),  # repeated times: merged (the default, mean)
    (lambda d: d.sample(frac=1, random_state=0).reset_index(drop=True), None),  # unsorted: sorted, as converted
])
def test_a_bad_recording_refuses_the_apply_in_one_line_and_writes_nothing(emulator_stack, bucket, tmp_path, msl,
                                                                            change, reason, capsys):
    storage: Storage = emulator_stack.storage
    (tmp_path / "eval").mkdir()
    part = msl.iloc[800:1200].reset_index(drop=True)  # 400 rows around the first anomaly
    change(part.copy()).to_parquet(tmp_path / "eval" / "part.parquet")
    spec_file = _series_spec(tmp_path, "part", "eval/part.parquet")
    code = cli(["datasets", "apply", str(spec_file), "--bucket", bucket])
    err = capsys.readouterr().err
    if reason is None:
        assert code == 0, err
        got = labelled.read(storage, specs.for_dataset(storage, bucket, "part").verdict["labelled"]["uri"])
        np.testing.assert_array_equal(got.rows, part.iloc[:, 1:-1].to_numpy(np.float32))  # in time order, once each
        np.testing.assert_array_equal(got.labels, part["Label"].to_numpy())
        return
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and reason in lines[0]
    assert "verdict.labelled.file eval/part.parquet" in lines[0]
    assert "Traceback" not in err and storage.list(f"gs://{bucket}/config/") == []


def test_a_series_datasets_npz_of_windows_is_still_read_as_instances(tmp_path, msl, capsys):
    rows = msl.iloc[:, 1:-1].to_numpy(np.float32)
    windows = np.stack([rows[i:i + 16] for i in range(800, 1200, 16)])
    marks = np.array([msl["Label"].iloc[i:i + 16].max() for i in range(800, 1200, 16)])
    (tmp_path / "eval").mkdir()
    np.savez(tmp_path / "eval" / "w.npz", x=windows, Label=marks)
    spec = tmp_path / "w.yaml"
    spec.write_text("apiVersion: landfall.dataset/v1\nname: w\nshape: {features: 55, window: {length: 16}}\n"
                    "arrival: {series: {time_column: time}}\nverdict: {labelled: {file: eval/w.npz, label: Label}}\n")
    assert cli(["datasets", "validate", str(spec)]) == 0
    assert f"labelled set: 25 instances, {int(marks.sum())} positives" in capsys.readouterr().out
