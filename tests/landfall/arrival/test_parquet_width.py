"""Wide Parquet: pyarrow holds a page and a dictionary per column, so a file too wide for the converter's
memory is rejected up front with its measured cost, not killed mid-read and retried until dead-lettered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from landfall.arrival import converter, formats
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput
from landfall.core.services.storage import Storage

ROWS, COLUMNS = 300_000, 64  # 1.2 MB a column chunk: pandas' 1 MiB pages and dictionaries in full
CFG = ConverterConfig(timesteps=16, features=4)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """As pandas writes a wide frame: its defaults, one row group."""
    path = tmp_path_factory.mktemp("wide") / "wide.parquet"
    frame = pd.DataFrame(np.random.default_rng(3).standard_normal((ROWS, COLUMNS), dtype=np.float32),
                         columns=[str(i) for i in range(COLUMNS)])
    frame.to_parquet(path, index=False)
    assert pq.read_metadata(path).num_row_groups == 1
    return path


def _all_columns_bytes(path, cfg: ConverterConfig) -> int:
    """What the converter's own read holds: every column's first batch at once."""
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    batches = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20).iter_batches(batch_size=cfg.chunk_instances)
    first = next(batches)
    used = pool.bytes_allocated() - before
    del first, batches
    return used


def test_the_probe_predicts_what_reading_every_column_holds(wide):
    predicted = formats.column_readers_bytes(pq.ParquetFile(wide, pre_buffer=False, buffer_size=1 << 20), CFG)
    actual = _all_columns_bytes(wide, CFG)
    assert actual > COLUMNS * 2**20  # at least a page a column: the cost is real
    assert abs(predicted - actual) < 0.2 * actual, (predicted >> 20, actual >> 20)


def test_too_wide_for_the_memory_limit_is_rejected_before_any_shard(wide, tmp_path):
    small = ConverterConfig(timesteps=16, features=4, memory_limit_mib=128)
    with pytest.raises(BadInput) as caught:
        converter.convert(str(wide), str(tmp_path / "out"), "wide", small, Storage())
    assert caught.value.reason == "parquet_too_wide"
    assert "64 columns" in str(caught.value) and "list column" in str(caught.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


def test_within_the_limit_it_converts(wide, tmp_path):
    manifest = converter.convert(str(wide), str(tmp_path / "out"), "wide", CFG, Storage())
    assert manifest.count == ROWS
    assert Manifest.from_json((tmp_path / "out" / "manifest.json").read_text()).count == ROWS
