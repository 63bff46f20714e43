"""A dataset's reference profile, and the quarantine an operator acts on.

- The **reference** (``tfrecords/<dataset>/_reference.json``, ``landfall.reference/v1``): the merge of the profiles
  (``landfall.core.profile``) of the dataset's admitted arrivals, bounded in size whatever their number. Updated by
  compare-and-swap on its generation (``merge_into_reference``); it names the last ``RECENT`` arrivals merged, so a
  redelivered event or a repeated ``landfall admit`` does not count one twice. No stage re-reads history to get it:
  compaction and snapshots leave it where it is (they list the live arrivals, which leaves quarantined ones out of
  snapshots until admitted, and never touch the reference).
- **Quarantine**: an arrival whose checks quarantined it (its manifest's ``checks.status``, and the manifest object's
  metadata ``quarantined``, so a listing sees it without reading the manifest) is not live (``landfall.core.
  retractions.list_dataset``) until an **admission** record (``admitted.json``, ``landfall.admission/v1``,
  create-only: who and when) is written beside it (``admit``); ``reject`` retracts it for good (a retraction record,
  reason ``rejected``, with who). Neither blocks the dataset: the other arrivals train as usual.
"""

from __future__ import annotations

import dataclasses
import json
import logging

from landfall.core.errors import AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.core.layout import ADMISSION, MANIFEST, PROFILE, REFERENCE, RETRACTION
from landfall.core.messages import Manifest, Retraction, utc_now
from landfall.core.profile import REFERENCE_SCHEMA, Profile
from landfall.core.storage import Storage

log = logging.getLogger("landfall.quarantine")

ADMISSION_SCHEMA = "landfall.admission/v1"
RECENT = 256  # arrivals the reference names, against merging one twice
ATTEMPTS = 8  # compare-and-swap rounds before giving up (temporary: the event is retried)


def _folder(uri: str) -> str:
    return uri.rstrip("/")


def reference_uri(arrival_folder: str) -> str:
    """The reference of the dataset an arrival folder (``.../tfrecords/<dataset>/<arrival-id>/``) belongs to."""
    return _folder(arrival_folder).rsplit("/", 1)[0] + "/" + REFERENCE


def read_reference(storage: Storage, uri: str) -> tuple[Profile | None, int | None]:
    """The reference and its generation; ``(None, None)`` before the dataset has one."""
    try:
        data, generation = storage.read_generation(uri)
    except NotFound:
        return None, None
    profile, _ = Profile.from_json(data, uri)
    return profile, generation


def merge_into_reference(storage: Storage, manifest_uri: str, arrival_id: str,
                         spec_generation: int | None = None) -> bool:
    """Adds the arrival's profile (beside ``manifest_uri``) to its dataset's reference; False if it was merged
    already (or has no profile). Raises ``TemporaryError`` after ``ATTEMPTS`` lost races.

    A dataset whose shape changed: an arrival of the new shape, converted under a newer spec generation
    (``spec_generation``, the manifest's) than the reference's, starts the reference again (logged); one of the old
    shape converted late, or any without a spec generation to tell, raises ``Invalid`` (logged by the caller; the
    arrival is never blocked)."""
    folder = manifest_uri.rsplit("/", 1)[0]
    try:
        profile, _ = Profile.from_json(storage.read_bytes(f"{folder}/{PROFILE}"), f"{folder}/{PROFILE}")
    except NotFound:
        return False
    uri = reference_uri(folder)
    for _ in range(ATTEMPTS):
        try:
            data, generation = storage.read_generation(uri)
            reference, raw = Profile.from_json(data, uri)
        except NotFound:
            reference, raw, generation = None, {}, 0
        recent = list(raw.get("recent", []))
        if arrival_id in recent:
            return False
        before = raw.get("spec_generation")  # the spec generation the reference was built under
        if reference is not None and reference.features != profile.features:
            # The dataset's shape changed (a converted arrival always has its spec's shape): what was measured of
            # the old shape says nothing of the new one, so the reference starts again from this arrival, and
            # the next ones are admitted as first until it holds enough (landfall.core.checks.Rules).
            if spec_generation is None or (isinstance(before, int) and spec_generation <= before):
                raise Invalid(f"{uri}: a reference of {reference.features} features (spec generation {before}); "
                              f"arrival {arrival_id} has {profile.features} (spec generation {spec_generation}): "
                              "not merged, admitted unchecked")
            log.warning("%s: the dataset's shape changed from %d to %d features: its reference starts again from %s",
                        uri, reference.features, profile.features, arrival_id,
                        extra={"fields": {"reference": uri, "arrival_id": arrival_id,
                                          "features_before": reference.features, "features": profile.features}})
            reference, recent = None, []
        merged = profile if reference is None else reference.merge(profile)
        newest = max((g for g in (before, spec_generation) if isinstance(g, int)), default=None)
        body = merged.to_json(REFERENCE_SCHEMA, recent=[*recent, arrival_id][-RECENT:], updated_at=utc_now(),
                              spec_generation=newest)
        try:
            storage.write_if_generation(uri, body, generation)
            return True
        except AlreadyExists:
            continue
    raise TemporaryError(f"{uri}: {ATTEMPTS} concurrent updates of the reference in a row; retry")


# -- the operator's decisions -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Admission:
    dataset: str
    arrival_id: str
    manifest: str
    by: str
    admitted_at: str = dataclasses.field(default_factory=utc_now)
    schema: str = ADMISSION_SCHEMA

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Admission:
        try:
            raw = json.loads(data)
            if raw.get("schema") != ADMISSION_SCHEMA:
                raise Invalid(f"{where}: schema is {raw.get('schema')!r}, expected {ADMISSION_SCHEMA!r}")
            return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw})
        except (ValueError, TypeError, AttributeError) as exc:
            raise Invalid(f"{where}: not a valid {ADMISSION_SCHEMA}: {str(exc)[:200]}") from None


def admission_uri(manifest_uri: str) -> str:
    return manifest_uri.rsplit("/", 1)[0] + "/" + ADMISSION


def admission(storage: Storage, manifest_uri: str) -> Admission | None:
    uri = admission_uri(manifest_uri)
    try:
        return Admission.from_json(storage.read_bytes(uri), uri)
    except NotFound:
        return None


def read_manifest(storage: Storage, manifest_uri: str) -> Manifest:
    if not manifest_uri.endswith("/" + MANIFEST):
        raise Invalid(f"{manifest_uri}: not a manifest ({MANIFEST})")
    return Manifest.from_json(storage.read_bytes(manifest_uri), manifest_uri)


def admit(storage: Storage, manifest_uri: str, by: str) -> tuple[Admission, bool]:
    """Releases a quarantined arrival: its admission record (create-only), then its profile into the reference.
    Returns the record and whether this call wrote it (False: it was admitted before, by the record's ``by``).
    ``Invalid`` for an arrival that is not quarantined."""
    manifest = read_manifest(storage, manifest_uri)
    if not manifest.quarantined:
        status = (manifest.checks or {}).get("status", "not profiled")
        raise Invalid(f"{manifest_uri}: arrival {manifest.arrival_id} is not quarantined (checks: {status})")
    try:
        gone = json.loads(storage.read_bytes(manifest_uri.rsplit("/", 1)[0] + "/" + RETRACTION))
        raise Invalid(f"{manifest_uri}: arrival {manifest.arrival_id} was retracted ({gone.get('reason')}"
                      f"{' by ' + gone['by'] if gone.get('by') else ''}) and is never trained on")
    except NotFound:
        pass
    record = Admission(manifest.dataset, manifest.arrival_id, manifest_uri, by)
    wrote = storage.create(admission_uri(manifest_uri), record.to_json(), content_type="application/json")
    if not wrote:
        existing = admission(storage, manifest_uri)
        record = existing or record
    merge_into_reference(storage, manifest_uri, manifest.arrival_id, manifest.spec_generation)
    log.info("admitted %s (quarantined by %s) by %s", manifest.arrival_id,
             ", ".join(f"{f['check']} on {f['feature']}" for f in manifest.checks["findings"]), record.by,
             extra={"arrival_id": manifest.arrival_id, "dataset": manifest.dataset,
                    "fields": {"manifest": manifest_uri, "by": record.by, "admitted_at": record.admitted_at}})
    return record, wrote



def reject(storage: Storage, manifest_uri: str, by: str) -> tuple[Retraction, bool]:
    """Retracts a quarantined arrival for good (a retraction record, reason ``rejected``, create-only). Returns the
    record and whether this call wrote it (False: it was retracted before). ``Invalid`` for an arrival that is not
    quarantined, or that an operator admitted already."""
    manifest = read_manifest(storage, manifest_uri)
    if not manifest.quarantined:
        status = (manifest.checks or {}).get("status", "not profiled")
        raise Invalid(f"{manifest_uri}: arrival {manifest.arrival_id} is not quarantined (checks: {status})")
    done = admission(storage, manifest_uri)
    if done is not None:
        raise Invalid(f"{manifest_uri}: arrival {manifest.arrival_id} was admitted by {done.by} at {done.admitted_at}")
    source = manifest.source
    record = Retraction(dataset=manifest.dataset, arrival_id=manifest.arrival_id, reason="rejected", by=by,
                        source={"bucket": source.bucket, "name": source.name, "generation": source.generation})
    uri = manifest_uri.rsplit("/", 1)[0] + "/" + RETRACTION
    wrote = storage.create(uri, record.to_json(), content_type="application/json")
    if not wrote:
        raw = json.loads(storage.read_bytes(uri))
        record = Retraction(**{f.name: raw[f.name] for f in dataclasses.fields(Retraction) if f.name in raw})
    log.info("rejected %s in quarantine by %s", manifest.arrival_id, record.by,
             extra={"arrival_id": manifest.arrival_id, "dataset": manifest.dataset,
                    "fields": {"manifest": manifest_uri, "by": record.by, "reason": record.reason}})
    return record, wrote


def summary(storage: Storage, manifest_uri: str) -> dict[str, object]:
    """A quarantined arrival as status, trace and the report show it: its source, and each finding's check,
    feature, measured value against its threshold (``error`` when its manifest cannot be read)."""
    try:
        manifest = read_manifest(storage, manifest_uri)
    except (Invalid, NotFound) as exc:
        return {"manifest": manifest_uri, "error": str(exc)}
    found = manifest.checks or {}
    return {"manifest": manifest_uri, "arrival_id": manifest.arrival_id, "name": manifest.source.name,
            "generation": manifest.source.generation, "created_at": manifest.created_at,
            "status": found.get("status"), "reference": found.get("reference"),
            "findings": [{k: f.get(k) for k in ("check", "feature", "measured", "threshold", "action", "index")}
                         for f in found.get("findings", [])]}


def finding_line(finding: dict[str, object]) -> str:
    """``scale_change on leg_vert: 687 (threshold 10)``."""
    return (f"{finding['check']} on {finding['feature']}: {float(finding['measured']):.4g} "  # type: ignore[arg-type]
            f"(threshold {float(finding['threshold']):g})")  # type: ignore[arg-type]
