"""One answer to "is this arrival held back by its checks?" (``landfall.core.contracts.messages.holds_back``, issue
#56): the training listing, the reference's refresh and the views gave opposite answers on a manifest that cannot be
read. Decided: it is held back (no job could load it; counted live it would fail every job of its dataset)."""

from __future__ import annotations

import json

from landfall.core.artifacts import retractions
from landfall.core.contracts.messages import holds_back
from landfall.core.services.storage import ObjectInfo, Storage


def _info(uri: str, metadata: dict | None = None) -> ObjectInfo:
    return ObjectInfo(uri, 1, 1, None, metadata)


def test_the_metadata_decides_on_cloud_storage_and_the_manifest_on_local_disk(tmp_path):
    storage = Storage()
    assert holds_back(storage, _info("gs://b/tfrecords/d/a/manifest.json", {"quarantined": "true"}))
    assert not holds_back(storage, _info("gs://b/tfrecords/d/a/manifest.json", {}))
    assert not holds_back(storage, _info("gs://b/tfrecords/d/a/manifest.json", None))  # no metadata: not held
    unreadable = tmp_path / "manifest.json"
    unreadable.write_text("{not json")
    assert holds_back(storage, _info(str(unreadable)))
    assert holds_back(storage, _info(str(tmp_path / "gone" / "manifest.json")))


def test_the_training_listing_keeps_an_unreadable_manifest_out_of_the_live_ones(tmp_path):
    """Before, ``retractions.list_dataset`` counted it live (and the job that loaded it failed) while the reference's
    refresh counted it held."""
    from tests.trainer.helpers import make_array, write_dataset

    storage = Storage()
    root = tmp_path / "tfrecords" / "d"
    good = write_dataset(storage, str(root / "good"), make_array(8, shape=(4, 2)), shards=1, arrival_id="good")
    bad = write_dataset(storage, str(root / "bad"), make_array(8, shape=(4, 2)), shards=1, arrival_id="bad")
    doc = json.loads((root / "bad" / "manifest.json").read_text())
    (root / "bad" / "manifest.json").write_text(json.dumps({**doc, "count": "many"}))  # no longer a manifest
    listing = retractions.list_dataset(storage, str(root) + "/")
    assert [m.uri for m in listing.live] == [good]
    assert [m.uri for m in listing.quarantined] == [bad]
