"""The arrival stage's checks of data that is well formed but wrong: an arrival's profile
(``landfall.core.quality.profile``,
gathered by the converter as it streams) against its dataset's reference, at the commit point.

- ``screen`` (before the manifest, by whoever commits it: the converter, a series conversion, the committer of Cloud
  Run tasks): reads the reference (one object), runs ``landfall.core.quality.checks.assess`` under the dataset's rules,
  writes
  the profile beside the shards and returns the manifest's ``checks`` section. A finding whose action is ``reject``
  raises ``BadInput("failed_check")``: the arrival's rejection record, nothing left visible.
- ``settle`` (after the manifest, ``handler.after_conversion``): logs what was flagged (WARNING lines, one per
  finding, with the check, the feature, the measured distance and its threshold) and, unless the arrival is
  quarantined (an operator's ``landfall admit`` merges it then: ``landfall.core.quality.quarantine``), publishes the
  reference if it is older than its cadence: no arrival writes the reference itself.

The reference (``tfrecords/<dataset>/_reference.json``, ``landfall.reference/v1``) is the merge of the profiles of
the dataset's admitted arrivals: as large as one profile whatever their number, published at most once per
``quarantine.CADENCE_S`` from the profiles stored beside the manifests (Cloud Storage takes one write per second to
one object name), so an arrival is screened against the reference as published up to a cadence before it
(``quarantine.refresh_reference``; docs/datasets.md#arrival-checks).
"""

from __future__ import annotations

import logging
from typing import Any

from landfall.arrival.config import ConverterConfig
from landfall.core.contracts.layout import PROFILE
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput, Invalid, TemporaryError
from landfall.core.quality import checks, quarantine
from landfall.core.quality.profile import Profile
from landfall.core.services.storage import Storage, is_gs, join

log = logging.getLogger("landfall.arrival")


def rules_of(cfg: ConverterConfig) -> checks.Rules:
    """The dataset's ``arrival.checks``; without one, every check runs and only warns."""
    try:
        return checks.Rules.parse(cfg.checks or None, default_action="warn")
    except (Invalid, ValueError) as exc:
        raise BadInput("invalid_spec", f"arrival.checks cannot be used: {exc}") from None


def screen(storage: Storage, out_prefix: str, cfg: ConverterConfig, profile: Profile | None) -> dict[str, Any] | None:
    """The manifest's ``checks`` section for an arrival converted into ``out_prefix`` (``None``: not profiled)."""
    if profile is None:
        return None
    rules = rules_of(cfg)
    uri = quarantine.reference_uri(out_prefix)
    try:
        reference, generation = quarantine.read_reference(storage, uri)
    except Invalid as exc:  # never blocks the dataset: its arrivals are admitted unchecked until it is replaced
        log.error("the dataset's reference cannot be read, so the arrival is not checked: %s", exc,
                  extra={"fields": {"reference": uri}})
        reference, generation = None, None
    names = cfg.series_channels if len(cfg.series_channels) == cfg.features else ()
    result = checks.assess(profile, reference, rules, names, generation)
    rejected = result.rejected
    if rejected:
        raise BadInput("failed_check", "; ".join(f.line() for f in rejected))
    storage.write_bytes(join(out_prefix, PROFILE), profile.to_json(), content_type="application/json")
    return {**result.to_dict(), "profile": PROFILE}


def settle(storage: Storage, manifest: Manifest, manifest_uri: str) -> None:
    """What follows a committed manifest's checks: its findings logged, its profile merged unless quarantined."""
    found = manifest.checks
    if not found:
        return
    context = {"arrival_id": manifest.arrival_id, "dataset": manifest.dataset}
    for finding in found.get("findings", []):
        log.warning("%s %s: %s on %s: measured %s, threshold %s", found["status"], manifest.source.name,
                    finding["check"], finding["feature"], finding["measured"], finding["threshold"],
                    extra={**context, "fields": {"check_status": found["status"], "check": finding["check"],
                                                 "feature": finding["feature"], "measured": finding["measured"],
                                                 "threshold": finding["threshold"], "action": finding["action"],
                                                 "manifest": manifest_uri}})
    if found["status"] == "first":
        log.info("%s admitted without checks: the dataset's reference holds %d arrivals, %d values per feature",
                 manifest.source.name, found["reference"]["arrivals"], found["reference"]["rows"],
                 extra={**context, "fields": {"check_status": "first", "manifest": manifest_uri}})
    if found["status"] != "quarantined":
        # Cloud Storage's one write per second to a name is the bucket's; a local folder publishes at every arrival
        cadence = quarantine.CADENCE_S if is_gs(manifest_uri) else 0.0
        dataset_uri = manifest_uri.rsplit("/", 2)[0] + "/"
        try:
            quarantine.refresh_reference(storage, dataset_uri, cadence_s=cadence)
        except Invalid as exc:  # an unreadable reference: logged, never blocks the arrival
            log.error("%s: the dataset's reference not published: %s", manifest.arrival_id, exc,
                      extra={**context, "fields": {"manifest": manifest_uri}})
        except TemporaryError as exc:  # the next arrival (or a later turn) publishes it: never retries this one
            log.info("%s: the dataset's reference not published now: %s", manifest.arrival_id, exc,
                     extra={**context, "fields": {"manifest": manifest_uri}})
