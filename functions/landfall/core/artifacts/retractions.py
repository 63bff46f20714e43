"""Retracted arrivals: an object's newest generation supersedes its older ones; deleting it retracts it.

The record (``landfall.retraction/v1``) is ``gs://BUCKET/tfrecords/<D>/<arrival-id>/retracted.json``, next
to the manifest, which stays for audit. It is create-only and never removed, so once retracted always
retracted: a late, duplicated or reordered event cannot bring stale data back. It may exist before the
manifest (a delete handled before the finalize); the arrival stage then never converts that arrival.
Every reader of a dataset's manifests goes through ``live_manifests``.
"""

from __future__ import annotations

import dataclasses
import logging

from landfall.core.contracts import layout
from landfall.core.contracts.layout import ADMISSION, MANIFEST, RETRACTION, Arrival, Layout
from landfall.core.contracts.messages import Retraction, holds_back
from landfall.core.services.storage import ObjectInfo, Storage

log = logging.getLogger("landfall.retractions")


def retract(storage: Storage, lay: Layout, arrival: Arrival, reason: str, by_generation: int | None = None) -> bool:
    """Records the retraction of ``arrival``; False if it was already retracted (nothing changes then)."""
    uri = layout.gs(arrival.bucket, layout.retraction_name(lay, arrival.dataset, arrival.arrival_id))
    record = Retraction(dataset=arrival.dataset, arrival_id=arrival.arrival_id, reason=reason,
                        by_generation=by_generation,
                        source={"bucket": arrival.bucket, "name": arrival.name, "generation": arrival.generation})
    if not storage.create(uri, record.to_json(), content_type="application/json"):
        return False
    log.info("retracted %s generation %d: %s", arrival.name, arrival.generation, reason,
             extra={"arrival_id": arrival.arrival_id, "dataset": arrival.dataset,
                    "fields": {"retraction": uri, "reason": reason, "by_generation": by_generation}})
    return True


def is_retracted(storage: Storage, lay: Layout, arrival: Arrival) -> bool:
    return storage.exists(layout.gs(arrival.bucket, layout.retraction_name(lay, arrival.dataset, arrival.arrival_id)))


def manifest_is_retracted(storage: Storage, manifest_uri: str) -> bool:
    return storage.exists(manifest_uri.rsplit("/", 1)[0] + "/" + RETRACTION)


@dataclasses.dataclass(frozen=True)
class ListedManifest:
    uri: str
    generation: int
    count: int | None  # from the manifest object's metadata (``count``), when the converter wrote it


def _records(storage: Storage, prefix: str, start: str = "") -> tuple[dict[str, ObjectInfo], set[str]]:
    """Arrival folders directly under ``prefix`` (whose ids begin with ``start``): {folder: manifest}
    and the retracted folders."""
    manifests, retracted = _listed(storage, prefix, start)
    return manifests, set(retracted)


def _listed(storage: Storage, prefix: str, start: str = "") -> tuple[dict[str, ObjectInfo], dict[str, ObjectInfo]]:
    """{folder: manifest object} and {folder: retraction object} of the arrivals directly under ``prefix``."""
    manifests, retracted, _ = _listed_all(storage, prefix, start)
    return manifests, retracted


def _listed_all(storage: Storage, prefix: str, start: str = "") -> tuple[dict[str, ObjectInfo], dict[str, ObjectInfo],
                                                                          set[str]]:
    """As ``_listed``, and the folders holding an admission record (``landfall.core.quality.quarantine``)."""
    manifests, retracted, admitted = {}, {}, set()
    for info in storage.list_objects(prefix + start, suffix=("/" + MANIFEST, "/" + RETRACTION, "/" + ADMISSION)):
        folder, _, leaf = info.uri.rpartition("/")
        if "/" in folder[len(prefix):]:
            continue  # deeper than <prefix><arrival-id>/
        if leaf == MANIFEST:
            manifests[folder] = info
        elif leaf == ADMISSION:
            admitted.add(folder)
        else:
            retracted[folder] = info
    return manifests, retracted, admitted


def _listed_manifest(info: ObjectInfo) -> ListedManifest:
    count = (info.metadata or {}).get("count")
    return ListedManifest(info.uri, info.generation, int(count) if count and count.isdigit() else None)


@dataclasses.dataclass(frozen=True)
class Listing:
    """One listing of a dataset: its live manifests and, for each retracted arrival that has a manifest,
    the manifest and the retraction record's generation (when it was retracted). ``quarantined``: the manifests
    whose checks hold them back and that no operator admitted yet (``landfall.core.quality.quarantine``): not live."""

    live: list[ListedManifest]
    retracted: list[tuple[ListedManifest, int]]
    quarantined: list[ListedManifest] = dataclasses.field(default_factory=list)


def list_dataset(storage: Storage, prefix: str) -> Listing:
    manifests, retracted, admitted = _listed_all(storage, prefix)
    current = [(folder, info, holds_back(storage, info) and folder not in admitted)
               for folder, info in sorted(manifests.items()) if folder not in retracted]
    live = [_listed_manifest(info) for _, info, hold in current if not hold]
    held = [_listed_manifest(info) for _, info, hold in current if hold]
    gone = [(_listed_manifest(manifests[folder]), info.generation) for folder, info in sorted(retracted.items())
            if folder in manifests]
    return Listing(live, gone, held)


def live_manifest_objects(storage: Storage, prefix: str) -> list[ListedManifest]:
    """The manifests of the arrivals under ``prefix`` (``gs://B/tfrecords/<D>/``) that are not retracted (nor
    quarantined and not admitted), with the generation and count the listing returns (no read per manifest)."""
    return list_dataset(storage, prefix).live


def live_manifests(storage: Storage, prefix: str) -> list[str]:
    """The manifests of the arrivals under ``prefix`` (``gs://B/tfrecords/<D>/``) that are not retracted."""
    return [m.uri for m in live_manifest_objects(storage, prefix)]


def retract_older(storage: Storage, lay: Layout, arrival: Arrival) -> list[int]:
    """Retracts every older generation of ``arrival``'s object that has a manifest; returns their generations.

    Lists only the arrival folders whose id starts like this object's (its file name), and recognises its
    own generations by their id, so other objects with the same file name are left alone.
    """
    prefix = layout.gs(arrival.bucket, layout.dataset_prefix(lay, arrival.dataset))
    manifests, retracted = _records(storage, prefix, layout.generations_prefix(arrival.name))
    done = []
    for folder in sorted(set(manifests) - retracted):
        aid = folder.rsplit("/", 1)[-1]
        generation = layout.generation_of(arrival.name, aid)
        if generation is not None and generation < arrival.generation:
            older = Arrival(arrival.bucket, arrival.name, generation, arrival.dataset, aid)
            if retract(storage, lay, older, "superseded", arrival.generation):
                done.append(generation)
    return done
