"""Data that is well formed but wrong, caught by the converter (landfall.arrival.screen): a real multichannel series
cut into arrivals, each fault injected alone, converted as the arrival stage converts (in process, and by Cloud Run
tasks); quarantined arrivals are held out of every listing until admitted, and never block the others."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from landfall.arrival import converter, screen
from landfall.arrival.config import ConverterConfig
from landfall.core.artifacts import retractions
from landfall.core.contracts.layout import PROFILE, REFERENCE
from landfall.core.contracts.messages import Manifest
from landfall.core.errors import BadInput, Invalid
from landfall.core.quality import quarantine
from landfall.core.quality.profile import REFERENCE_SCHEMA, Profile
from landfall.core.services.storage import Storage
from landfall_bench import realdata
from tests.landfall.arrival.ranged_helpers import committed, run_all


@pytest.fixture(autouse=True)
def _reference_at_every_arrival(monkeypatch):
    """These tests check what the reference holds after each arrival; its cadence under Cloud Storage's write rate
    (one publish per quarantine.CADENCE_S) is tests/landfall/arrival/test_reference_burst.py's."""
    monkeypatch.setattr(quarantine, "CADENCE_S", 0.0)

CHANNELS = realdata.DAPHNET_CHANNELS
ROWS = 320  # five seconds of Daphnet at 64 Hz per arrival: 22 arrivals
SERIES = ConverterConfig(timesteps=64, features=9, series_time_column="timestamp", series_channels=CHANNELS,
                         drop_nonfinite=True, checks="{}", project="test")


@pytest.fixture(scope="module")
def daphnet() -> np.ndarray:
    return realdata.daphnet()[1]


def write_series(path: Path, values: np.ndarray, start: int, channels: tuple[str, ...] = CHANNELS) -> str:
    times = (start + np.arange(len(values))) / 64.0
    with path.open("w") as fh:
        fh.write("timestamp," + ",".join(channels) + "\n")
        for t, row in zip(times, values, strict=True):
            fh.write(f"{t:.6f}," + ",".join("" if np.isnan(v) else repr(float(v)) for v in row) + "\n")
    return str(path)


def arrive(storage: Storage, cfg: ConverterConfig, src: str, out: Path, name: str) -> Manifest:
    """Converts one arrival as the stage does, then settles it (findings logged, reference merged)."""
    folder = out / name
    manifest = converter.convert(src, str(folder), "gait", cfg, storage)
    screen.settle(storage, manifest, str(folder / "manifest.json"))
    return manifest


@pytest.fixture(scope="module")
def gait(daphnet, tmp_path_factory) -> dict:
    """A series dataset with the first 14 arrivals of Daphnet converted and screened: its reference."""
    root = tmp_path_factory.mktemp("gait")
    storage, out = Storage("test"), root / "tfrecords" / "gait"
    manifests = []
    for i in range(14):
        src = write_series(root / f"a{i}.csv", daphnet[i * ROWS:(i + 1) * ROWS], i * ROWS)
        manifests.append(arrive(storage, SERIES, src, out, f"a{i}"))
    return {"root": root, "storage": storage, "out": out, "manifests": manifests}


def test_the_first_arrivals_are_admitted_saying_so_and_the_reference_grows_with_them(gait):
    statuses = [m.checks["status"] for m in gait["manifests"]]
    # 1,000 values per feature from 3 arrivals: the fourth arrival (960 rows before it) is still first
    assert statuses[:4] == ["first"] * 4 and statuses[4:] == ["admitted"] * 10
    reference, raw = quarantine.Profile.from_json((gait["out"] / REFERENCE).read_bytes())
    assert reference.arrivals == 14 and reference.rows == 14 * ROWS
    # each published with the arrivals its checks admitted, named while their manifests are new (quarantine.NEAR_US)
    assert sorted(raw["near"]) == sorted(m.arrival_id for m in gait["manifests"])
    assert all((gait["out"] / m.arrival_id / PROFILE).exists() for m in gait["manifests"])


def test_a_redelivered_arrival_is_not_merged_twice(gait):
    first = gait["manifests"][0]
    assert not quarantine.merge_into_reference(gait["storage"], str(gait["out"] / "a0" / "manifest.json"),
                                               first.arrival_id)
    assert quarantine.refresh_reference(gait["storage"], str(gait["out"]), cadence_s=0) == 0


def test_a_changed_shape_starts_the_reference_again_and_a_late_arrival_of_the_old_shape_leaves_it(daphnet, tmp_path,
                                                                                                    caplog):
    """The spec drops a channel (generation 2): the first arrival of the new shape is admitted as first and starts
    the reference again, logged; one of the old shape converted late (generation 1) is not merged, and never
    blocked; the next of the new shape joins the new reference."""
    storage, out = Storage("test"), tmp_path / "tfrecords" / "gait"
    old = dataclasses.replace(SERIES, spec_generation=1)
    new = dataclasses.replace(SERIES, features=8, series_channels=CHANNELS[:8], spec_generation=2)

    def one(cfg: ConverterConfig, i: int) -> Manifest:
        channels = cfg.series_channels
        values = daphnet[i * ROWS:(i + 1) * ROWS, :len(channels)]
        return arrive(storage, cfg, write_series(tmp_path / f"s{i}.csv", values, i * ROWS, channels), out, f"s{i}")

    for i in range(4):
        one(old, i)
    before, raw = Profile.from_json((out / REFERENCE).read_bytes())
    assert (before.features, before.arrivals, raw["spec_generation"]) == (9, 4, 1)
    with caplog.at_level(logging.WARNING, logger="landfall"):
        changed = one(new, 4)
    assert changed.checks["status"] == "first"  # nothing to check an arrival of the new shape against yet
    reference, raw = Profile.from_json((out / REFERENCE).read_bytes())
    assert (reference.features, reference.arrivals, raw["spec_generation"]) == (8, 1, 2)
    assert changed.arrival_id in raw["near"]
    assert any("shape changed from 9 to 8 features" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="landfall"):
        late = one(old, 5)  # converted under the old spec, settled after the change
    assert late.checks["status"] == "first" and late.count > 0  # admitted, unchecked
    assert any("not merged" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert Profile.from_json((out / REFERENCE).read_bytes())[0].arrivals == 1  # the new reference is untouched
    one(new, 6)
    reference, raw = Profile.from_json((out / REFERENCE).read_bytes())
    assert (reference.features, reference.arrivals) == (8, 2) and changed.arrival_id in raw["near"]


FAULTS = {  # fault: (check, feature)
    "x1000": ("scale_change", "leg_vert"),
    "constant": ("flat_channel", "leg_vert"),
    "swapped": ("swapped_channels", "ankle_vert,trunk_horiz_fwd"),
    "missing 30%": ("missing_values", "leg_vert"),
}


def inject(kind: str, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    values = values.copy()
    leg, ankle, trunk = CHANNELS.index("leg_vert"), CHANNELS.index("ankle_vert"), CHANNELS.index("trunk_horiz_fwd")
    if kind == "x1000":
        values[:, leg] *= 1000
    elif kind == "constant":
        values[:, leg] = values[0, leg]
    elif kind == "swapped":
        values[:, [ankle, trunk]] = values[:, [trunk, ankle]]
    elif kind == "missing 30%":
        values[rng.random(len(values)) < 0.3, leg] = np.nan
    return values


@pytest.mark.parametrize("at", [14, 18])
@pytest.mark.parametrize("kind", list(FAULTS))
def test_each_fault_is_quarantined_by_name_and_the_clean_arrival_passes(gait, daphnet, kind, at, tmp_path):
    storage, out = gait["storage"], gait["out"]
    before = quarantine.read_reference(storage, str(out / REFERENCE))[0].arrivals
    values = daphnet[at * ROWS:(at + 1) * ROWS]
    name = f"bad-{kind.replace(' ', '').replace('%', '')}-{at}"
    clean = converter.convert(write_series(tmp_path / "clean.csv", values, at * ROWS), str(out / f"clean-{name}"),
                              "gait", SERIES, storage)  # converted, not merged: the reference stays as it was
    assert clean.checks["status"] == "admitted" and clean.checks["findings"] == []
    src = write_series(tmp_path / "bad.csv", inject(kind, values, np.random.default_rng(at)), at * ROWS)
    manifest = arrive(storage, SERIES, src, out, name)
    check, feature = FAULTS[kind]
    assert manifest.quarantined
    assert [(f["check"], f["feature"], f["action"]) for f in manifest.checks["findings"]] == \
        [(check, feature, "quarantine")]
    assert manifest.checks["reference"]["arrivals"] == before
    listing = retractions.list_dataset(storage, str(out) + "/")
    assert str(out / name / "manifest.json") in [m.uri for m in listing.quarantined]
    assert str(out / name / "manifest.json") not in [m.uri for m in listing.live]
    assert len(listing.live) >= 14  # quarantine never blocks the others
    assert quarantine.read_reference(storage, str(out / REFERENCE))[0].arrivals == before  # not merged


def test_admitting_releases_the_arrival_records_who_and_merges_it(gait, daphnet, tmp_path, caplog):
    storage, out = gait["storage"], gait["out"]
    values = inject("x1000", daphnet[20 * ROWS:21 * ROWS], np.random.default_rng(0))
    with caplog.at_level(logging.WARNING, logger="landfall.arrival"):
        manifest = arrive(storage, SERIES, write_series(tmp_path / "x.csv", values, 20 * ROWS), out, "held")
    warned = [r for r in caplog.records if getattr(r, "fields", {}).get("check") == "scale_change"]
    assert warned and warned[0].fields["feature"] == "leg_vert" and warned[0].fields["check_status"] == "quarantined"
    uri = str(out / "held" / "manifest.json")
    before = quarantine.read_reference(storage, str(out / REFERENCE))[0].arrivals
    record, wrote = quarantine.admit(storage, uri, by="ops@example.com")
    assert wrote and record.by == "ops@example.com" and record.arrival_id == manifest.arrival_id
    assert json.loads((out / "held" / "admitted.json").read_text())["by"] == "ops@example.com"
    assert uri in [m.uri for m in retractions.list_dataset(storage, str(out) + "/").live]
    assert quarantine.read_reference(storage, str(out / REFERENCE))[0].arrivals == before + 1
    again, wrote = quarantine.admit(storage, uri, by="someone-else")
    assert not wrote and again.by == "ops@example.com"  # the first decision stands
    with pytest.raises(Invalid, match="is not quarantined"):
        quarantine.admit(storage, str(out / "a5" / "manifest.json"), by="ops")


def test_a_reject_action_is_the_arrivals_rejection_and_leaves_nothing(gait, daphnet, tmp_path):
    storage = gait["storage"]
    copy = tmp_path / "tfrecords" / "gait"
    copy.mkdir(parents=True)
    (copy / REFERENCE).write_bytes((gait["out"] / REFERENCE).read_bytes())
    cfg = dataclasses.replace(SERIES, checks=json.dumps({"flat_channel": {"action": "reject"}}))
    values = inject("constant", daphnet[15 * ROWS:16 * ROWS], np.random.default_rng(0))
    with pytest.raises(BadInput) as caught:
        converter.convert(write_series(tmp_path / "c.csv", values, 0), str(copy / "c"), "gait", cfg, storage)
    assert caught.value.reason == "failed_check"
    assert "flat_channel on leg_vert" in caught.value.detail
    assert not (copy / "c").exists() or not any((copy / "c").rglob("*"))


# -- instances (the Decoder path), in process and by Cloud Run tasks ------------------------------------------------
@pytest.fixture(scope="module")
def motions() -> np.ndarray:
    x = np.concatenate([realdata.basic_motions("train")[0], realdata.basic_motions("test")[0]])
    return x[np.random.default_rng(0).permutation(len(x))]  # the activities arrive mixed


def write_csv(path: Path, batch: np.ndarray) -> str:
    np.savetxt(path, batch.reshape(len(batch), -1), delimiter=",", fmt="%.6f")
    return str(path)


def test_instances_in_process_and_by_tasks_are_checked_alike(motions, tmp_path):
    storage = Storage("test")
    cfg = ConverterConfig(timesteps=100, features=6, checks="{}", project="test", chunk_instances=4,
                          csv_header="absent")
    out = tmp_path / "tfrecords" / "watch"
    for i in range(12):  # four recordings per arrival
        folder = out / f"a{i}"
        manifest = converter.convert(write_csv(tmp_path / f"a{i}.csv", motions[4 * i:4 * i + 4]), str(folder),
                                     "watch", cfg, storage)
        screen.settle(storage, manifest, str(folder / "manifest.json"))
        assert not manifest.checks["findings"], manifest.checks
    bad = motions[60:72].copy()
    bad[..., 2] *= 1000  # a channel in other units
    src = write_csv(tmp_path / "bad.csv", bad)
    inline = converter.convert(src, str(out / "inline"), "watch", cfg, storage)
    tasks = committed(run_all(storage, cfg, src, str(out / "tasks"), 3))
    for manifest in (inline, tasks):
        assert manifest.quarantined
        assert [(f["check"], f["feature"]) for f in manifest.checks["findings"]] == [("scale_change", "2")]
    assert [m.uri.rsplit("/", 2)[1] for m in retractions.list_dataset(storage, str(out) + "/").quarantined] == \
        ["inline", "tasks"]


def test_profiling_off_writes_no_profile_and_no_checks(motions, tmp_path):
    storage = Storage("test")
    cfg = ConverterConfig(timesteps=100, features=6, project="test", csv_header="absent", profile=False)
    manifest = converter.convert(write_csv(tmp_path / "a.csv", motions[:4]), str(tmp_path / "out" / "a"), "w", cfg,
                                 storage)
    assert manifest.checks is None and not (tmp_path / "out" / "a" / PROFILE).exists()


def test_an_unreadable_or_mismatched_reference_never_blocks_an_arrival(motions, tmp_path, caplog):
    storage = Storage("test")
    cfg = ConverterConfig(timesteps=100, features=6, checks="{}", project="test", csv_header="absent")
    out = tmp_path / "tfrecords" / "watch"
    out.mkdir(parents=True)
    (out / REFERENCE).write_text("{not json")
    with caplog.at_level(logging.ERROR, logger="landfall.arrival"):
        manifest = converter.convert(write_csv(tmp_path / "a.csv", motions[:4]), str(out / "a"), "watch", cfg, storage)
        screen.settle(storage, manifest, str(out / "a" / "manifest.json"))
    assert manifest.checks["status"] == "first"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and messages[0].startswith("the dataset's reference cannot be read")
    assert messages[1].startswith(f"{manifest.arrival_id}: the dataset's reference not published")
    other = tmp_path / "tfrecords" / "other"
    other.mkdir(parents=True)
    nine = Profile(9)  # a reference of nine features: no yardstick for an arrival of six
    (other / REFERENCE).write_bytes(nine.to_json(REFERENCE_SCHEMA))
    manifest = converter.convert(write_csv(tmp_path / "b.csv", motions[:4]), str(other / "b"), "other", cfg, storage)
    assert manifest.checks["status"] == "first"
