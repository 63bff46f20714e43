"""``Storage.create``: the create-only write every record that decides who acts relies on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.fixture(params=["local", "gcs"])
def root(request, tmp_path, emulator_stack, bucket):
    if request.param == "local":
        return emulator_stack.storage, str(tmp_path / "records")
    return emulator_stack.storage, f"gs://{bucket}/records"


def test_of_concurrent_creators_exactly_one_wins_and_its_bytes_stay(root):
    storage, prefix = root
    uri = f"{prefix}/decision.json"
    contenders = [f'{{"by": {i}}}'.encode() for i in range(12)]
    with ThreadPoolExecutor(12) as pool:
        won = list(pool.map(lambda data: storage.create(uri, data, content_type="application/json"), contenders))
    assert won.count(True) == 1
    assert storage.read_bytes(uri) == contenders[won.index(True)]
    # A repeat (a redelivery) neither wins nor overwrites.
    assert storage.create(uri, b'{"by": "late"}') is False
    assert storage.read_bytes(uri) == contenders[won.index(True)]
