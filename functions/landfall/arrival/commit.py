"""The commit both conversions end with (``landfall.arrival.converter`` for instances, ``landfall.arrival.series``
for series; ``landfall.arrival.ranged_parts`` writes its manifest with the same metadata): the shards written under
attempt-private temporary names move to their final ``part-0000i-of-0000N`` names, then the manifest is written
last and create-only, the commit point readers wait for.
"""

from __future__ import annotations

from landfall.core.contracts.layout import shard_name
from landfall.core.contracts.messages import Manifest, Shard
from landfall.core.services.storage import Storage, join


def publish_shards(storage: Storage, parts: list[tuple[str, int, int, str]], out_prefix: str,
                   tmp_prefix: str) -> list[Shard]:
    """Moves the temporary shards to their final ``part-0000i-of-0000N`` names, now that N is known."""
    shards = []
    for i, (tmp_uri, n, size, crc) in enumerate(parts):
        final = join(out_prefix, shard_name(i, len(parts)))
        storage.move(tmp_uri, final)
        shards.append(Shard(uri=final, count=n, bytes=size, crc32c=crc))
    storage.remove_empty_dir(tmp_prefix)
    return shards


def commit_manifest(storage: Storage, manifest_uri: str, manifest: Manifest) -> Manifest:
    """Writes the manifest last and create-only: the commit point readers wait for."""
    # The count in the object's metadata lets a release list counts without reading each manifest; so does
    # ``quarantined`` its hold (landfall.core.quality.quarantine).
    if not storage.create(manifest_uri, manifest.to_json().encode(), content_type="application/json",
                          metadata=manifest_metadata(manifest)):
        # A concurrent delivery finished first; its manifest describes the same bytes.
        return Manifest.from_json(storage.read_bytes(manifest_uri), manifest_uri)
    return manifest


def manifest_metadata(manifest: Manifest) -> dict[str, str]:
    """The manifest object's custom metadata: its count, its checks' status, and whether they quarantined it."""
    status = {"checks": str(manifest.checks["status"])} if manifest.checks else {}
    return {"count": str(manifest.count), **status, **({"quarantined": "true"} if manifest.quarantined else {})}
