"""Every arrival of a bucket listed once and classified once: the answer ``landfall status``, ``trace`` and
``report`` all show (issue #56; before, each listed ``tfrecords/`` and classified on its own, and they disagreed on
a manifest that could not be read).

An arrival is a folder ``tfrecords/<dataset>/<arrival-id>/`` with at least one of its records (``RECORDS``), or an
arrival stage's rejection ``rejected/<dataset>/<arrival-id>.json``. Its ``state``, decided here only:

- ``rejected``: the arrival stage refused the file (a rejection record, no manifest);
- ``retracted``: a retraction record (a newer generation of its object, or ``landfall reject``): no job trains on it;
- ``quarantined``: converted, and its checks hold it back (``core.contracts.messages.holds_back``: the manifest's
  metadata, or the manifest itself where no metadata is kept; **a manifest that cannot be read holds it back too**),
  with no admission record (``landfall admit``);
- ``converted``: converted and trainable (a manifest; ``warned`` when a check flagged it and it is trained on);
- ``converting``: dispatched to the Cloud Run convert job and no manifest yet (converting, or failed for good);
- ``failing`` is a flag beside the state: its event raised and is retried (``core.artifacts.failing.current``).

Listing is one pass over ``tfrecords/`` (the records only, by suffix) and one over ``rejected/``; nothing is read but
a manifest on a store that keeps no metadata (local disk). ``one`` classifies a single arrival the same way, from its
folder's own listing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from landfall.core.artifacts import failing
from landfall.core.contracts import layout
from landfall.core.contracts.layout import ADMISSION, DISPATCH, FAILING, MANIFEST, RETRACTION, Layout
from landfall.core.contracts.messages import holds_back
from landfall.core.errors import NotFound
from landfall.core.rules import timestamps

RECORDS = (MANIFEST, RETRACTION, DISPATCH, ADMISSION, FAILING)
REJECTED, RETRACTED, QUARANTINED, CONVERTED, CONVERTING = "rejected", "retracted", "quarantined", "converted", \
    "converting"
STATES = (CONVERTED, QUARANTINED, RETRACTED, CONVERTING, REJECTED)
REQUEST_REJECTION = "request-"  # the submit stage's rejections (rejected/<dataset>/request-<id>.json): not arrivals


@dataclasses.dataclass(frozen=True)
class Arrival:
    """One arrival as every view shows it."""

    dataset: str
    arrival_id: str
    state: str | None  # one of STATES; None: only an admission or a failing record (not an arrival to count)
    records: dict[str, Any]  # its listed records (``ObjectInfo``) by name: manifest.json, retraction.json, ...
    rejection: Any = None  # its arrival-stage rejection record (``ObjectInfo``), if any
    warned: bool = False  # converted with a check's warning, and trained on
    failing: bool = False  # its event raised and is retried (or dead-lettered)

    @property
    def first(self) -> Any:
        """The record that dates it: its manifest, else its dispatch, retraction or rejection."""
        return (self.records.get(MANIFEST) or self.records.get(DISPATCH) or self.records.get(RETRACTION)
                or self.rejection)

    @property
    def at(self) -> str | None:
        """When that record was written (its generation's time; None on a store whose generations are not times)."""
        first = self.first
        return timestamps.of_generation(first.generation) if first is not None else None


def classify(storage: Any, records: dict[str, Any], rejection: Any = None) -> tuple[str | None, bool, bool]:
    """(state, warned, failing) of an arrival with these listed ``records`` and arrival-stage ``rejection``."""
    superseded = rejection is not None or MANIFEST in records or RETRACTION in records
    fails = failing.current(records.get(FAILING), records.get(DISPATCH), superseded=superseded)
    manifest = records.get(MANIFEST)
    if RETRACTION in records:
        return RETRACTED, False, fails
    if manifest is not None:
        warned = (manifest.metadata or {}).get("checks") == "warned"
        if ADMISSION not in records and holds_back(storage, manifest):
            return QUARANTINED, False, fails
        return CONVERTED, warned, fails
    if DISPATCH in records:
        return CONVERTING, False, fails
    if rejection is not None:
        return REJECTED, False, fails
    return None, False, fails


def rejections(storage: Any, bucket: str, lay: Layout | None = None,
               dataset: str | None = None) -> dict[str, list[Any]]:
    """Every rejection record (``ObjectInfo``) by dataset, the arrival stage's and the submit stage's, from one listing
    of ``rejected/`` (``INVALID_DATASET`` holds those that name no valid dataset)."""
    prefix = layout.gs(bucket, (lay or Layout()).rejected_prefix)
    out: dict[str, list[Any]] = {}
    for info in storage.list_objects(prefix + (f"{dataset}/" if dataset else ""), suffix=".json"):
        out.setdefault(info.uri[len(prefix):].split("/", 1)[0], []).append(info)
    return out


def _arrival_rejections(found: dict[str, list[Any]]) -> dict[tuple[str, str], Any]:
    out: dict[tuple[str, str], Any] = {}
    for ds, infos in found.items():
        for info in infos:
            name = info.uri.rsplit("/", 1)[-1]
            if ds != layout.INVALID_DATASET and not name.startswith(REQUEST_REJECTION):
                out[(ds, name.removesuffix(".json"))] = info
    return out


def listing(storage: Any, bucket: str, lay: Layout | None = None, dataset: str | None = None,
            rejected: dict[str, list[Any]] | None = None) -> list[Arrival]:
    """Every arrival of the bucket (of ``dataset`` only, when named), in (dataset, arrival id) order. ``rejected``:
    what ``rejections`` returned, when the caller has listed them already."""
    lay = lay or Layout()
    prefix = layout.gs(bucket, lay.tfrecords_prefix)
    folders: dict[tuple[str, str], dict[str, Any]] = {}
    for info in storage.list_objects(prefix + (f"{dataset}/" if dataset else ""),
                                     suffix=tuple("/" + r for r in RECORDS)):
        parts = info.uri[len(prefix):].split("/")
        if len(parts) == 3:  # <dataset>/<arrival-id>/<record>
            folders.setdefault((parts[0], parts[1]), {})[parts[2]] = info
    refused = _arrival_rejections(rejections(storage, bucket, lay, dataset) if rejected is None else rejected)
    out = []
    for key in sorted(set(folders) | set(refused)):
        records, rejection = folders.get(key, {}), refused.get(key)
        state, warned, fails = classify(storage, records, rejection)
        out.append(Arrival(key[0], key[1], state, records, rejection, warned, fails))
    return out


def one(storage: Any, bucket: str, lay: Layout, dataset: str, arrival_id: str) -> Arrival:
    """One arrival, classified as ``listing`` classifies it (its state None when nothing of it is recorded)."""
    folder = layout.gs(bucket, layout.shards_prefix(lay, dataset, arrival_id))
    records = {info.uri[len(folder):]: info
               for info in storage.list_objects(folder, suffix=tuple("/" + r for r in RECORDS))
               if "/" not in info.uri[len(folder):]}
    try:
        rejection = storage.stat(layout.gs(bucket, layout.rejection_name(lay, dataset, arrival_id)))
    except NotFound:
        rejection = None
    state, warned, fails = classify(storage, records, rejection)
    return Arrival(dataset, arrival_id, state, records, rejection, warned, fails)
