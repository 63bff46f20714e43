"""The stored labelled set (landfall.core.artifacts.labelled) and `landfall datasets validate|apply` with a labelled
file,
against fake-gcs-server."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from landfall.cli import main as cli
from landfall.core.artifacts import labelled, specs
from landfall.core.errors import Invalid, NotFound
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
    assert f"labelled set {uri} (40 instances, 30 positives)" in out
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
