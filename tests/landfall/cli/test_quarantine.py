"""``landfall admit`` and ``landfall reject``: an operator's decision on a quarantined arrival, recorded with who and
when, and what every listing then sees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from landfall.arrival import converter, screen
from landfall.arrival.config import ConverterConfig
from landfall.cli import main
from landfall.core.artifacts import retractions
from landfall.core.quality import quarantine
from landfall.core.services.storage import Storage
from landfall_bench import realdata


@pytest.fixture(autouse=True)
def _reference_at_every_arrival(monkeypatch):
    """These tests check what the reference holds after each arrival; its cadence under Cloud Storage's write rate
    (one publish per quarantine.CADENCE_S) is tests/landfall/arrival/test_reference_burst.py's."""
    monkeypatch.setattr(quarantine, "CADENCE_S", 0.0)

CFG = ConverterConfig(timesteps=100, features=6, checks="{}", project="test", csv_header="absent")


@pytest.fixture()
def held(tmp_path, monkeypatch) -> tuple[Path, list[str]]:
    """A dataset folder with eight admitted arrivals of BasicMotions and two quarantined ones (a channel x1000)."""
    monkeypatch.setenv("LANDFALL_STATE_DIR", str(tmp_path / "no-stack"))
    x = np.concatenate([realdata.basic_motions("train")[0], realdata.basic_motions("test")[0]])
    x = x[np.random.default_rng(0).permutation(len(x))]
    storage, out = Storage("test"), tmp_path / "tfrecords" / "watch"
    quarantined = []
    for i in range(10):
        batch = x[4 * i:4 * i + 4].copy()
        if i >= 8:
            batch[..., 1] *= 1000
        src = tmp_path / f"a{i}.npy"
        np.save(src, batch)
        manifest = converter.convert(str(src), str(out / f"a{i}"), "watch", CFG, storage)
        screen.settle(storage, manifest, str(out / f"a{i}" / "manifest.json"))
        if manifest.quarantined:
            quarantined.append(str(out / f"a{i}" / "manifest.json"))
    assert len(quarantined) == 2
    return out, quarantined


def live(out: Path) -> list[str]:
    return [m.uri for m in retractions.list_dataset(Storage("test"), str(out) + "/").live]


def test_admit_releases_it_and_records_who_and_when(held, capsys):
    out, (first, _) = held
    assert first not in live(out)
    assert main(["admit", first, "--by", "ann@example.com", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["by"] == "ann@example.com" and doc["written"] and doc["admitted_at"]
    assert first in live(out)
    assert main(["admit", first, "--by", "bob"]) == 0  # the first decision stands
    assert "admitted (already, before this call): a8 of watch by ann@example.com" in capsys.readouterr().out
    assert json.loads(Path(first).with_name("admitted.json").read_text())["by"] == "ann@example.com"


def test_reject_retracts_it_for_good_and_records_who(held, capsys):
    out, (_, second) = held
    assert main(["reject", second, "--by", "cy", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reason"] == "rejected" and doc["by"] == "cy"
    listing = retractions.list_dataset(Storage("test"), str(out) + "/")
    assert second not in [m.uri for m in listing.live + listing.quarantined]
    assert second in [m.uri for m, _ in listing.retracted]
    assert main(["admit", second, "--by", "dee"]) == 1  # retracted for good
    assert "was retracted (rejected by cy)" in capsys.readouterr().err
    assert second not in live(out)


def test_a_decision_on_an_arrival_that_is_not_held_is_one_line_naming_it(held, capsys):
    out, (first, _) = held
    assert main(["reject", str(out / "a0" / "manifest.json"), "--by", "x"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a0/manifest.json" in err[0] and "is not quarantined (checks: first)" in err[0]
    assert main(["admit", first, "--by", "x"]) == 0
    assert main(["reject", first, "--by", "y"]) == 1
    assert "was admitted by x" in capsys.readouterr().err
    assert main(["admit", "some-arrival"]) == 1
    assert "pass --dataset and --bucket" in capsys.readouterr().err


def test_a_quarantined_arrival_end_to_end_on_the_emulators(emulator_stack, bucket, arrival_runtime, monkeypatch,
                                                             tmp_path, capsys):
    """The arrival stage quarantines the faulty file; status and trace say why; the release leaves it out while the
    others train; ``landfall admit`` puts it back, recording who."""
    from landfall.arrival import handler
    from landfall.core.contracts import layout
    from landfall.core.contracts.events import ObjectEvent
    from landfall.core.contracts.layout import Layout
    from landfall.submit import coalesce

    for key, value in {**emulator_stack.env(), "LANDFALL_STATE_DIR": str(tmp_path / "no-stack")}.items():
        monkeypatch.setenv(key, value)
    rt = arrival_runtime(timesteps=100, features=6, checks="{}")
    x = np.concatenate([realdata.basic_motions("train")[0], realdata.basic_motions("test")[0]])
    x = x[np.random.default_rng(0).permutation(len(x))]
    events = []
    for i in range(5):
        batch = x[4 * i:4 * i + 4].copy()
        if i == 4:
            batch[..., 1] *= 1000
        path = tmp_path / f"w{i}.npy"
        np.save(path, batch)
        uri = f"gs://{bucket}/incoming/watch/w{i}.npy"
        rt.storage.upload(path, uri)
        info = rt.storage.stat(uri)
        events.append(ObjectEvent(bucket, f"incoming/watch/w{i}.npy", info.generation, info.size, info.crc32c))
        assert handler.handle(events[-1], rt) == "converted"
    bad = layout.arrival_id(events[4].name, events[4].generation)
    good = layout.arrival_id(events[3].name, events[3].generation)

    def released() -> list[str]:
        manifests, _ = coalesce.manifests_for("watch", bucket, 0, rt.storage, Layout())
        return [m.uri.rsplit("/", 2)[1] for m in manifests]

    assert bad not in released() and good in released() and len(released()) == 4
    assert main(["status", "--bucket", bucket, "--dataset", "watch", "--backend", "local", "--state",
                 str(tmp_path / "state"), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["datasets"]["watch"]
    assert status["arrivals"] == 5 and status["quarantined"] == 1
    (held,) = status["latest_quarantined"]
    assert held["arrival_id"] == bad and held["findings"][0]["check"] == "scale_change"
    assert held["findings"][0]["feature"] == "1" and held["findings"][0]["measured"] > held["findings"][0]["threshold"]
    assert main(["status", "--bucket", bucket, "--dataset", "watch", "--backend", "local", "--state",
                 str(tmp_path / "state")]) == 0
    text = capsys.readouterr().out
    assert "5 arrivals, 0 retracted" in text and "1 quarantined (not trained on until admitted)" in text
    assert f"  quarantined incoming/watch/w4.npy#{events[4].generation} ({bad}): scale_change on 1: " in text
    assert f"(threshold 10); not trained on until `landfall admit {bad} --dataset watch`" in text
    assert main(["trace", bad, "--dataset", "watch", "--bucket", bucket, "--backend", "local", "--state",
                 str(tmp_path / "state"), "--json"]) == 0
    trace = json.loads(capsys.readouterr().out)
    assert trace["stop"].startswith("quarantined (scale_change on 1: ") and "landfall admit" in trace["stop"]
    from landfall.local import compactor
    from landfall.views import page
    from landfall.views.reader import Reader

    reference_uri = f"gs://{bucket}/tfrecords/watch/_reference.json"
    before = rt.storage.stat(reference_uri).generation
    compacted = compactor.run(rt.storage, bucket, "watch", 1 << 20)
    assert compacted["arrivals"] == 4  # the quarantined arrival stays out of the snapshot ...
    assert rt.storage.stat(reference_uri).generation == before  # ... and compaction leaves the reference as it is

    data = page.collect(Reader(rt.storage, bucket, Layout()))
    (watch,) = [d for d in data["datasets"] if d["name"] == "watch"]
    assert [a["state"] for a in watch["arrivals"]].count("quarantined") == 1
    (shown,) = watch["quarantined"]
    (finding,) = shown["findings"]
    assert (finding["check"], finding["feature"], finding["index"]) == ("scale_change", "1", 1)
    bins = finding["bins"]  # before/after: the reference's deciles, and a bin each below and above them
    assert len(bins["reference"]) == len(bins["arrival"]) == len(bins["edges"]) + 2
    assert bins["reference"][-1] == 0 and bins["arrival"][-1] > 0.4  # x1000: much of it above all the reference saw
    assert sum(bins["reference"]) == pytest.approx(1, abs=1e-3) and sum(bins["arrival"]) == pytest.approx(1, abs=1e-3)
    html_text = page.render(data)
    assert "Quarantined arrivals" in html_text and 'aria-label="before/after histogram"' in html_text
    assert bad in html_text
    assert main(["admit", bad, "--dataset", "watch", "--bucket", bucket, "--by", "ops"]) == 0
    assert f"admitted: {bad} of watch by ops" in capsys.readouterr().out
    assert main(["status", "--bucket", bucket, "--dataset", "watch", "--backend", "local", "--state",
                 str(tmp_path / "state"), "--json"]) == 0
    admitted = json.loads(capsys.readouterr().out)["datasets"]["watch"]
    assert admitted["arrivals"] == 5 and "quarantined" not in admitted  # admitted: no view holds it back any more
    # A dataset whose spec sets no arrival.checks: the same file is flagged, trained on, and counted
    lax = arrival_runtime(timesteps=100, features=6)
    for i in range(5):
        uri = f"gs://{bucket}/incoming/loose/w{i}.npy"
        rt.storage.upload(tmp_path / f"w{i}.npy", uri)
        info = rt.storage.stat(uri)
        assert handler.handle(ObjectEvent(bucket, f"incoming/loose/w{i}.npy", info.generation, info.size,
                                          info.crc32c), lax) == "converted"
    manifests, _ = coalesce.manifests_for("loose", bucket, 0, rt.storage, Layout())
    assert len(manifests) == 5  # warned: trained on
    assert main(["status", "--bucket", bucket, "--dataset", "loose", "--backend", "local", "--state",
                 str(tmp_path / "state"), "--json"]) == 0
    loose = json.loads(capsys.readouterr().out)["datasets"]["loose"]
    assert loose["warned"] == 1 and "quarantined" not in loose
    assert bad in released() and len(released()) == 5
    assert main(["trace", bad, "--dataset", "watch", "--bucket", bucket, "--backend", "local", "--state",
                 str(tmp_path / "state"), "--json"]) == 0
    steps = [s["what"] for s in json.loads(capsys.readouterr().out)["steps"]]
    assert steps[:4] == ["object", "manifest", "checks", "admission"]
