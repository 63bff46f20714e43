"""A dataset's reference profile, and the quarantine an operator acts on.

- The **reference** (``tfrecords/<dataset>/_reference.json``, ``landfall.reference/v1``): the merge of the profiles
  (``landfall.core.quality.profile``) of the dataset's admitted arrivals, bounded in size whatever their number. Cloud
  Storage takes one write per second to one object name (#39), so arrivals do not each update it: it is
  **published at a bounded cadence** (``refresh_reference``, at most once per ``CADENCE_S``) from the profiles
  already stored beside the manifests, by whichever arrival finds it older than that (its generation's
  compare-and-swap makes one of concurrent publishers win; the others write nothing). It records how far it got:
  ``through`` (the newest manifest generation merged) and ``near`` (the arrivals merged whose manifests lie within
  ``NEAR_US`` of it, so one listed late is still merged once, and only once). An operator's admission merges its
  arrival directly (``merge_into_reference``); it names the last ``RECENT`` arrivals merged that way, so a repeated
  ``landfall admit`` does not count one twice. No stage re-reads history to get it:
  compaction and snapshots leave it where it is (they list the live arrivals, which leaves quarantined ones out of
  snapshots until admitted, and never touch the reference).
- **Quarantine**: an arrival whose checks quarantined it (its manifest's ``checks.status``, and the manifest object's
  metadata ``quarantined``, so a listing sees it without reading the manifest) is not live (``landfall.core.
  retractions.list_dataset``) until an **admission** record (``admitted.json``, ``landfall.admission/v1``,
  create-only: who and when) is written beside it (``admit``); ``reject`` retracts it for good (a retraction record,
  reason ``rejected``, with who). Neither blocks the dataset: the other arrivals train as usual.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import time
from collections.abc import Callable

from landfall.core.contracts.layout import ADMISSION, MANIFEST, PROFILE, REFERENCE, RETRACTION
from landfall.core.contracts.messages import Manifest, Retraction, holds_back, loads_object, text_of, utc_now
from landfall.core.errors import AlreadyExists, Invalid, NotFound, TemporaryError
from landfall.core.quality.profile import REFERENCE_SCHEMA, Profile
from landfall.core.services.storage import ObjectInfo, Storage

log = logging.getLogger("landfall.quarantine")

ADMISSION_SCHEMA = "landfall.admission/v1"
RECENT = 256  # arrivals the reference names, against merging one twice
ATTEMPTS = 8  # compare-and-swap rounds before giving up (temporary: the event is retried)
# Cloud Storage: "Maximum rate of writes to the same object name: one write per second" (https://cloud.google.com/
# storage/quotas, read 2026-12-03). The reference is published at most once per CADENCE_S, half that rate, which
# leaves room for an operator's admissions and for clock skew between the publishers and Cloud Storage.
CADENCE_S = 2.0
# How late a manifest may show up in a listing after its generation (its write time in microseconds) and still be
# merged exactly once: the arrivals merged within this of ``through`` are named (``near``). Cloud Storage's listings
# are strongly consistent, so this only covers clock and commit skew; at 100 arrivals a second it names 1,000.
NEAR_US = 10_000_000
READERS = 16  # profiles read at a time by a publisher


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
        if arrival_id in recent or arrival_id in dict(raw.get("near", {})):
            return False  # merged already: by an admission, or published with its checks' admission
        before = raw.get("spec_generation")  # the spec generation the reference was built under
        if reference is not None and reference.features != profile.features:
            # The dataset's shape changed (a converted arrival always has its spec's shape): what was measured of
            # the old shape says nothing of the new one, so the reference starts again from this arrival, and
            # the next ones are admitted as first until it holds enough (landfall.core.quality.checks.Rules).
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
        kept = {k: raw[k] for k in PUBLISHED if k in raw} if reference is not None else {}
        body = merged.to_json(REFERENCE_SCHEMA, **kept, recent=[*recent, arrival_id][-RECENT:], updated_at=utc_now(),
                              spec_generation=newest)
        try:
            storage.write_if_generation(uri, body, generation)
            return True
        except AlreadyExists:
            continue
    raise TemporaryError(f"{uri}: {ATTEMPTS} concurrent updates of the reference in a row; retry")


PUBLISHED = ("through", "near", "published_s")  # what refresh_reference records of how far it got


def _arrival_of(info: ObjectInfo) -> str:
    return info.uri.rsplit("/", 2)[-2]


def refresh_reference(storage: Storage, dataset_uri: str, *, cadence_s: float = CADENCE_S,
                      clock: Callable[[], float] = time.time) -> int:
    """Publishes the dataset's reference (``dataset_uri``: ``gs://B/tfrecords/<dataset>/``) with the profiles of the
    arrivals admitted by their checks since it was last published, unless it was published less than ``cadence_s``
    ago (by ``clock``); returns how many it merged (0: too soon, nothing new, or another publisher won the
    compare-and-swap: that one merged them). One listing of the dataset, one read per new profile, at most one write.
    A ``TemporaryError`` (Cloud Storage unavailable, or 429: the caller's clock ran ahead) is the caller's: the next
    publisher merges what this one did not."""
    uri = dataset_uri.rstrip("/") + "/" + REFERENCE
    try:
        data, generation = storage.read_generation(uri)
        reference, raw = Profile.from_json(data, uri)
    except NotFound:
        reference, raw, generation = None, {}, 0
    if clock() - float(raw.get("published_s", 0.0)) < cadence_s:
        return 0
    through, near = int(raw.get("through", 0)), {str(k): int(v) for k, v in dict(raw.get("near", {})).items()}
    prefix = dataset_uri.rstrip("/") + "/"
    listed = [i for i in storage.list_objects(prefix, suffix="/" + MANIFEST) if "/" not in i.uri[len(prefix):-len(
        "/" + MANIFEST)] and i.generation > through - NEAR_US and _arrival_of(i) not in near]
    fresh = sorted((i for i in listed if not holds_back(storage, i)), key=lambda i: (i.generation, i.uri))
    if not fresh:
        return 0

    def read(info: ObjectInfo) -> Profile | None:
        where = info.uri.rsplit("/", 1)[0] + "/" + PROFILE
        try:
            return Profile.from_json(storage.read_bytes(where), where)[0]
        except NotFound:
            return None  # not profiled (LANDFALL_PROFILE=false): nothing to merge
        except Invalid as exc:
            log.error("%s not merged into the dataset's reference: %s", where, exc)
            return None

    with concurrent.futures.ThreadPoolExecutor(min(READERS, len(fresh))) as pool:
        profiles = list(pool.map(read, fresh))
    before = raw.get("spec_generation")
    merged = 0
    for info, profile in zip(fresh, profiles, strict=True):
        if profile is None:
            continue
        if reference is not None and reference.features != profile.features:
            spec_generation = read_manifest(storage, info.uri).spec_generation
            if spec_generation is None or (isinstance(before, int) and spec_generation <= before):
                log.error("%s: a reference of %d features (spec generation %s); arrival %s has %d (spec generation "
                          "%s): not merged, admitted unchecked", uri, reference.features, before, _arrival_of(info),
                          profile.features, spec_generation)
                continue
            log.warning("%s: the dataset's shape changed from %d to %d features: its reference starts again from %s",
                        uri, reference.features, profile.features, _arrival_of(info),
                        extra={"fields": {"reference": uri, "arrival_id": _arrival_of(info),
                                          "features_before": reference.features, "features": profile.features}})
            reference, before = None, spec_generation
        if reference is None:
            before = read_manifest(storage, info.uri).spec_generation  # the generation it is built under
        reference = profile if reference is None else reference.merge(profile)
        merged += 1
    newest = max([through, *(i.generation for i in fresh)])
    near.update({_arrival_of(i): i.generation for i in fresh})
    near = {k: v for k, v in near.items() if v > newest - NEAR_US}
    if reference is None:
        return 0
    body = reference.to_json(REFERENCE_SCHEMA, recent=list(raw.get("recent", [])), updated_at=utc_now(),
                             spec_generation=before, through=newest, near=near, published_s=clock())
    try:
        storage.write_if_generation(uri, body, generation)
    except AlreadyExists:
        return 0  # another publisher won: it merged these (or will, on the next turn)
    return merged


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
        raw = loads_object(data, where)  # any body: Invalid naming it (#46)
        try:
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
    retraction_uri = manifest_uri.rsplit("/", 1)[0] + "/" + RETRACTION
    try:
        body = storage.read_bytes(retraction_uri)
    except NotFound:
        pass
    else:  # retracted, whatever the record says (an unreadable one is still a retraction)
        try:
            gone = loads_object(body, retraction_uri)
        except Invalid:
            gone = {}
        by = text_of(gone.get("by"))
        raise Invalid(f"{manifest_uri}: arrival {manifest.arrival_id} was retracted ({text_of(gone.get('reason'))}"
                      f"{' by ' + by if by else ''}) and is never trained on")
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
        raw = loads_object(storage.read_bytes(uri), uri)
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
