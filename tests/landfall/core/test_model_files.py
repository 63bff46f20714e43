"""A champion's files by digest (landfall.core.artifacts.model_files): the scorer loads exactly what was promoted."""

from __future__ import annotations

import pytest

from landfall.core.artifacts import model_files
from landfall.core.errors import Invalid


def _folder(root):
    (root / "variables").mkdir(parents=True)
    (root / "saved_model.pb").write_bytes(b"graph")
    (root / "variables" / "variables.index").write_bytes(b"index")
    (root / "normalization.json").write_text('{"mean": [0.0]}')
    return root


def test_the_files_promoted_are_loaded_and_any_change_is_refused_in_one_line(tmp_path):
    folder = _folder(tmp_path / "model")
    promoted = model_files.of_folder(folder)
    assert set(promoted) == {"saved_model.pb", "variables/variables.index", "normalization.json"}
    model_files.check(folder, promoted, "gs://b/runs/j/model")  # as promoted: loaded
    model_files.check(folder, None, "gs://b/runs/j/model")  # a record from before digests: loaded as it was

    (folder / "variables" / "variables.index").write_bytes(b"other")
    with pytest.raises(Invalid, match=r"variables/variables.index differs from the file promoted .*not loaded"):
        model_files.check(folder, promoted, "gs://b/runs/j/model")
    (folder / "variables" / "variables.index").write_bytes(b"index")
    (folder / "assets").mkdir()
    (folder / "assets" / "extra.txt").write_bytes(b"x")
    with pytest.raises(Invalid, match=r"assets/extra\.txt was not among the files promoted"):
        model_files.check(folder, promoted, "gs://b/runs/j/model")
    (folder / "assets" / "extra.txt").unlink()
    (folder / "normalization.json").unlink()
    with pytest.raises(Invalid, match=r"normalization\.json is missing"):
        model_files.check(folder, promoted, "gs://b/runs/j/model")
    for bad in (["saved_model.pb"], {"saved_model.pb": 3}):  # a record whose files are valid JSON of another type
        with pytest.raises(Invalid, match="not a map of digests"):
            model_files.check(folder, bad, "gs://b/runs/j/model")
