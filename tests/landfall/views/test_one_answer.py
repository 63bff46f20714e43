"""``landfall status``, ``trace`` and ``report`` read the bucket through one read model (``landfall.views``, issue
#56) and give one answer for an arrival that is quarantined and whose manifest is unreadable, or missing when read.

Before, each listed and classified arrivals on its own: ``trace`` read the manifest's own checks and, finding none in
a manifest it could not parse (or no manifest at all), traced the arrival as converted or not converted, while
``status`` and ``report`` counted it quarantined from the object's metadata. Decided: the metadata Cloud Storage keeps
with the manifest (``quarantined``, written with it) is the answer, as the training listing reads it
(``core.contracts.messages.holds_back``): such an arrival is quarantined, not trained on, in all three views, and
each names the manifest it cannot read. On a store without metadata (local disk) an unreadable manifest holds its
arrival back too (tests/landfall/core/test_holds_back.py)."""

from __future__ import annotations

import json

from landfall.cli import status, trace
from landfall.core.contracts.layout import Layout
from landfall.core.errors import NotFound
from landfall.core.services.storage import Storage
from landfall.submit.backends import open_backend
from landfall.submit.config import JobConfig
from landfall.views import arrivals, page
from landfall.views.reader import Reader

DATASET = "watch"
UNREADABLE, MISSING, LIVE = "unreadable-g1-0000000a", "missing-g2-0000000b", "live-g3-0000000c"


class ManifestGone(Storage):
    """Cloud Storage in which one listed manifest is gone by the time it is read (a delete between the listing and
    the read: Cloud Storage lists strongly, but nothing stops a delete in between)."""

    def __init__(self, gone: str):
        super().__init__("test")
        self.gone = gone

    def read_bytes(self, uri: str, *args, **kwargs) -> bytes:
        if uri == self.gone:
            raise NotFound(f"{uri}: not found")
        return super().read_bytes(uri, *args, **kwargs)


def _manifest(bucket: str, aid: str) -> str:
    return f"gs://{bucket}/tfrecords/{DATASET}/{aid}/manifest.json"


def _views(storage: Storage, bucket: str, tmp_path) -> dict[str, dict[str, str]]:
    """Each arrival's state in each view."""
    cfg = JobConfig.load({}, bucket=bucket, backend="local", local_state=str(tmp_path / "state"))
    shown = status.collect(cfg, storage, open_backend(cfg), DATASET)["datasets"][DATASET]
    held_in_status = {q["manifest"].rsplit("/", 2)[1] for q in shown.get("latest_quarantined", [])}
    assert shown["quarantined"] == len(held_in_status)
    data = page.collect(Reader(storage, bucket, Layout()))
    (entry,) = [d for d in data["datasets"] if d["name"] == DATASET]
    out: dict[str, dict[str, str]] = {}
    for aid in (UNREADABLE, MISSING, LIVE):
        traced = trace.trace_arrival(Reader(storage, bucket, Layout()), DATASET, aid)
        out[aid] = {
            "status": "quarantined" if aid in held_in_status else "converted",
            "report": next(a["state"] for a in entry["arrivals"] if a["arrival_id"] == aid),
            "trace": "quarantined" if traced.stop.startswith("quarantined") else traced.stop,
        }
    return out


def test_status_trace_and_report_agree_on_an_unreadable_and_a_missing_manifest(emulator_stack, bucket, tmp_path):
    writer = Storage("test")
    quarantined = {"quarantined": "true", "checks": "quarantined"}
    writer.write_bytes(_manifest(bucket, UNREADABLE), b"{not json", metadata=quarantined)
    writer.write_bytes(_manifest(bucket, MISSING), json.dumps({"count": 1}).encode(), metadata=quarantined)
    writer.write_bytes(_manifest(bucket, LIVE), json.dumps({"count": 1}).encode(), metadata={"checks": "passed"})
    storage = ManifestGone(_manifest(bucket, MISSING))

    seen = _views(storage, bucket, tmp_path)
    assert seen[UNREADABLE] == {"status": "quarantined", "report": "quarantined", "trace": "quarantined"}
    assert seen[MISSING] == {"status": "quarantined", "report": "quarantined", "trace": "quarantined"}
    assert seen[LIVE]["status"] == seen[LIVE]["report"] == "converted"
    assert not seen[LIVE]["trace"].startswith("quarantined")

    # Each says why: the manifest it could not read.
    traced = trace.trace_arrival(Reader(storage, bucket, Layout()), DATASET, MISSING)
    assert "its manifest cannot be read" in traced.stop
    assert [s.text for s in traced.steps if s.what == "manifest"] == ["its manifest cannot be read: listed, and "
                                                                      "not found when read"]
    cfg = JobConfig.load({}, bucket=bucket, backend="local", local_state=str(tmp_path / "state"))
    errors = {q["manifest"]: q.get("error") for q in
              status.collect(cfg, storage, open_backend(cfg), DATASET)["datasets"][DATASET]["latest_quarantined"]}
    assert "not found" in errors[_manifest(bucket, MISSING)] and errors[_manifest(bucket, UNREADABLE)]


def test_one_classification_serves_the_listing_and_a_single_arrival(emulator_stack, bucket):
    storage = Storage("test")
    storage.write_bytes(_manifest(bucket, UNREADABLE), b"{not json", metadata={"quarantined": "true"})
    storage.write_bytes(_manifest(bucket, LIVE), b"{}", metadata={"checks": "warned"})
    storage.write_bytes(f"gs://{bucket}/tfrecords/{DATASET}/{MISSING}/retracted.json", b"{}")
    storage.write_bytes(f"gs://{bucket}/rejected/{DATASET}/refused-g4-0000000d.json", b"{}")
    storage.write_bytes(f"gs://{bucket}/rejected/{DATASET}/request-abc.json", b"{}")  # the submit stage's: no arrival
    listed = {a.arrival_id: (a.state, a.warned) for a in arrivals.listing(storage, bucket, Layout(), DATASET)}
    assert listed == {UNREADABLE: ("quarantined", False), LIVE: ("converted", True), MISSING: ("retracted", False),
                      "refused-g4-0000000d": ("rejected", False)}
    for aid, state in listed.items():
        assert arrivals.one(storage, bucket, Layout(), DATASET, aid).state == state[0]
    assert arrivals.one(storage, bucket, Layout(), DATASET, "never-g5-0000000e").state is None
