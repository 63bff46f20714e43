"""Adding an input format is one module and its registration (issue #56, ``landfall.arrival.format_registry``).

The smallest real example, registered by this test and not shipped: JSON Lines (``.jsonl``), one instance per line as
a JSON array of ``T x F`` numbers. Its ``FORMAT`` below is the whole change: with it registered, the converter turns
a ``.jsonl`` arrival into shards and a manifest, the router sizes it (its own rate; one task, since it gives no
byte ranges), a ranged task converts it whole, the labelled reader refuses it with the format's own reason, and the
unsupported-extension message names it. Before the registry, a format meant edits in ``formats.py``, ``series.py``
(three), ``ranges.py``, ``route.py`` (rate, ``SPLITTABLE``), ``labelled.py`` and the help texts: about 11 in 6
modules."""

from __future__ import annotations

import json

import numpy as np
import pytest

from landfall.arrival import converter, format_registry, formats, labelled_file, ranges, route
from landfall.arrival.config import ConverterConfig
from landfall.arrival.format_registry import Format
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage
from tests.support import read_back

CFG = ConverterConfig(timesteps=4, features=3, project="test")


def _jsonl_instances(src, size, cfg):
    """One instance per line, ``chunk_instances`` lines at a time."""
    def chunks():
        block = []
        for number, line in enumerate(iter(src.readline, b""), 1):  # the guarded stream: bytes, a line at a time
            if not line.strip():
                continue
            try:
                values = np.asarray(json.loads(line), np.float32)
            except ValueError as exc:
                raise BadInput("corrupt_jsonl", f"line {number} is not a JSON array of numbers: {exc}") from None
            if values.shape != (cfg.timesteps * cfg.features,):
                raise BadInput("wrong_column_count", f"line {number} holds {values.size} numbers, expected "
                               f"T*F = {cfg.timesteps * cfg.features}")
            block.append(values.reshape(cfg.timesteps, cfg.features))
            if len(block) == cfg.chunk_instances:
                yield np.stack(block)
                block = []
        if block:
            yield np.stack(block)
    return chunks(), None


JSONL = Format(name="jsonl", suffixes=(".jsonl",), rate=50e6, instances=_jsonl_instances,
               no_labels="a labelled set does not arrive as JSON Lines (no room for a {label} column)")


@pytest.fixture()
def jsonl():
    format_registry.register(JSONL)
    yield JSONL
    format_registry.unregister(JSONL.name)


def _write(path, x):
    path.write_text("\n".join(json.dumps(row.reshape(-1).tolist()) for row in x) + "\n")
    return path


def test_a_format_registered_by_a_test_converts_routes_and_refuses_labels(jsonl, tmp_path):
    x = np.random.default_rng(0).normal(size=(37, 4, 3)).astype(np.float32)
    src = _write(tmp_path / "a.jsonl", x)
    storage = Storage("test")
    assert formats.format_of(str(src)) == "jsonl"
    manifest = converter.convert(str(src), str(tmp_path / "out" / "a"), "ds", CFG, storage)
    assert manifest.count == 37 and manifest.shape == [4, 3]
    np.testing.assert_array_equal(read_back(storage, manifest), x)
    # The router: its own rate sets the inline limit; no byte ranges, so one task converts it whole.
    assert route.inline_limit("jsonl", CFG) == int(route.SAFETY * route.FUNCTION_TIMEOUT_S * 50e6)
    assert route.task_count("jsonl", 10**12, CFG) == 1
    with src.open("rb") as fh:
        whole = ranges.share("jsonl", fh, src.stat().st_size, CFG, 0, 3)
        assert np.concatenate(list(whole.chunks)).shape == (37, 4, 3)
    with src.open("rb") as fh:
        assert list(ranges.share("jsonl", fh, src.stat().st_size, CFG, 1, 3).chunks) == []
    # Its own rejections, and the labelled reader's refusal in its words.
    bad = tmp_path / "b.jsonl"
    bad.write_text("[1, 2]\n")
    with pytest.raises(BadInput, match=r"wrong_column_count: line 1 holds 2 numbers"):
        converter.convert(str(bad), str(tmp_path / "out" / "b"), "ds", CFG, storage)
    with pytest.raises(BadInput, match=r"unsupported_format: a labelled set does not arrive as JSON Lines"):
        labelled_file.load(storage, str(src), CFG)


def test_unknown_endings_name_every_registered_format(jsonl):
    with pytest.raises(BadInput, match=r"\.npy, \.npz, \.csv, \.csv\.gz, \.parquet or \.jsonl"):
        formats.format_of("a.avro")
    format_registry.unregister("jsonl")
    with pytest.raises(BadInput, match=r"\.npy, \.npz, \.csv, \.csv\.gz or \.parquet\)"):
        formats.format_of("a.jsonl")
    with pytest.raises(BadInput, match=r"a series arrives as \.csv, \.csv\.gz or \.parquet, not \.npy"):
        format_registry.series_reader("npy")
