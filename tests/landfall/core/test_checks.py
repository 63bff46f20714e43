"""The checks of an arrival against its dataset's reference (landfall.core.quality.checks) on real series: the defaults
flag
none of 265 clean arrivals, and each injected fault is caught by name, on the right feature."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from landfall.arrival.stats import RunningStats
from landfall.core.errors import Invalid
from landfall.core.quality import checks
from landfall.core.quality.profile import Profile
from landfall_bench import realdata

CHANNELS = realdata.DAPHNET_CHANNELS
ROWS = 64  # one second of Daphnet at 64 Hz per arrival


def rows_profile(rows: np.ndarray, dropped: np.ndarray | None = None) -> Profile:
    stats = RunningStats(rows.shape[1])
    stats.update(rows[:, None, :])
    out = Profile(rows.shape[1])
    out.update_rows(rows)
    if dropped is not None:
        out.dropped(dropped)
    return out.finish(stats.to_dict())


def instances_profile(batch: np.ndarray) -> Profile:
    stats = RunningStats(batch.shape[2])
    stats.update(batch)
    out = Profile(batch.shape[2])
    out.update(batch)
    return out.finish(stats.to_dict())


@functools.cache
def daphnet_arrivals(rows: int = ROWS) -> tuple[np.ndarray, ...]:
    values = realdata.daphnet()[1]
    return tuple(values[i:i + rows] for i in range(0, len(values) - rows + 1, rows))


@functools.cache
def basic_motions() -> tuple[np.ndarray, np.ndarray]:
    x = np.concatenate([realdata.basic_motions("train")[0], realdata.basic_motions("test")[0]])
    return x, np.random.default_rng(0).permutation(len(x))  # the activities arrive mixed, not in blocks


def streamed(profiles: list[Profile], rules: checks.Rules, names=()) -> list[checks.Assessment]:
    """Each arrival checked against the reference of the arrivals before it that were not quarantined."""
    reference, out = None, []
    for p in profiles:
        result = checks.assess(p, reference, rules, names)
        out.append(result)
        if result.status != "quarantined":
            reference = Profile(p.features).merge(p) if reference is None else reference.merge(p)
    return out


@functools.cache
def daphnet_reference(count: int = 100) -> Profile:
    reference = Profile(len(CHANNELS))
    for rows in daphnet_arrivals()[:count]:
        reference.merge(rows_profile(rows))
    return reference


@functools.cache
def daphnet_seconds() -> np.ndarray:
    return realdata.daphnet()[0].astype("datetime64[ms]").astype(np.int64) / 1000.0


def timed_profile(rows: np.ndarray, times: np.ndarray) -> Profile:
    """A series arrival's profile with its time steps, as the converter takes it."""
    stats = RunningStats(rows.shape[1])
    stats.update(rows[:, None, :])
    out = Profile(rows.shape[1])
    out.update_rows(rows)
    out.update_steps(np.diff(times))
    return out.finish(stats.to_dict())


def test_the_defaults_flag_none_of_510_clean_real_arrivals():
    """Every check, the #39 ones included (time steps, pairs, gains against what clean arrivals showed): the
    Daphnet recording with its own timestamps, BasicMotions' recordings as series stamped every 0.1 s (its rate) and
    as instances, each arrival checked against the reference of the clean ones before it."""
    x, order = basic_motions()
    seconds = daphnet_seconds()

    def daphnet_series(rows: int) -> list[Profile]:
        return [timed_profile(r, seconds[i * rows:(i + 1) * rows]) for i, r in enumerate(daphnet_arrivals(rows))]

    streams = {
        "daphnet, 1 s arrivals": [rows_profile(r) for r in daphnet_arrivals(64)],
        "daphnet, 2 s arrivals": [rows_profile(r) for r in daphnet_arrivals(128)],
        "basic motions, one recording per arrival": [instances_profile(x[i:i + 1]) for i in order],
        "basic motions, four per arrival": [instances_profile(x[order[i:i + 4]]) for i in range(0, 80, 4)],
        "daphnet with its timestamps, 1 s arrivals": daphnet_series(64),
        "daphnet with its timestamps, 2 s arrivals": daphnet_series(128),
        "basic motions as series at 10 Hz, one recording per arrival": [timed_profile(x[i], np.arange(100) * 0.1)
                                                                         for i in order],
    }
    rules = checks.Rules.parse({})  # the defaults, quarantining
    total, flagged, first = 0, {}, 0
    for name, profiles in streams.items():
        for i, result in enumerate(streamed(profiles, rules)):
            total += 1
            first += result.status == "first"
            if result.findings:
                flagged[f"{name} #{i}"] = [f.line() for f in result.findings]
    assert total == 265 + 110 + 55 + 80
    assert flagged == {}
    assert first == 2 * (16 + 8 + 10) + 3  # until the reference holds 1,000 values per feature from 3 arrivals


def test_the_first_arrivals_are_admitted_and_say_so():
    profiles = [rows_profile(r) for r in daphnet_arrivals()[:17]]
    results = streamed(profiles, checks.Rules.parse({}))
    assert [r.status for r in results[:16]] == ["first"] * 16  # 15 x 64 rows < 1,000
    assert results[16].status == "admitted" and results[16].reference["arrivals"] == 16


FAULTS = {
    "x1000": ("scale_change", "leg_vert"),
    "constant": ("flat_channel", "leg_vert"),
    "swapped": ("swapped_channels", "ankle_vert,trunk_horiz_fwd"),
    "missing 30%": ("missing_values", "leg_vert"),
}


def faulty(kind: str, rows: np.ndarray, rng: np.random.Generator) -> Profile:
    rows = rows.copy()
    leg_vert, ankle_vert, trunk_fwd = CHANNELS.index("leg_vert"), CHANNELS.index("ankle_vert"), \
        CHANNELS.index("trunk_horiz_fwd")
    if kind == "x1000":
        rows[:, leg_vert] *= 1000
    elif kind == "constant":
        rows[:, leg_vert] = rows[0, leg_vert]
    elif kind == "swapped":
        rows[:, [ankle_vert, trunk_fwd]] = rows[:, [trunk_fwd, ankle_vert]]
    elif kind == "missing 30%":  # with arrival.drop_nonfinite: the rows are dropped, their missing values counted
        missing = rng.random(len(rows)) < 0.3
        rows[missing, leg_vert] = np.nan
        return rows_profile(rows[~missing], rows[missing])
    return rows_profile(rows)


@pytest.mark.parametrize("kind", list(FAULTS))
def test_each_injected_fault_is_caught_by_name_on_its_feature(kind):
    reference, rules, rng = daphnet_reference(), checks.Rules.parse({}), np.random.default_rng(11)
    check, feature = FAULTS[kind]
    for rows in daphnet_arrivals()[100:110]:  # ten later seconds, each faulty alone
        clean = checks.assess(rows_profile(rows), reference, rules, CHANNELS)
        assert clean.status == "admitted" and clean.findings == ()
        result = checks.assess(faulty(kind, rows, rng), reference, rules, CHANNELS)
        assert result.status == "quarantined"
        assert [(f.check, f.feature, f.action) for f in result.findings] == [(check, feature, "quarantine")]
        assert result.findings[0].measured >= result.findings[0].threshold if check != "swapped_channels" else \
            result.findings[0].measured <= result.findings[0].threshold


def test_anomalous_windows_at_5_percent_pass_the_profile_checks():
    """A 5 % contamination of anomalous windows barely moves a feature's distribution: the profile does not see it
    (docs/datasets.md#arrival-checks: scoring new data with the champion is what would)."""
    reference, rules, rng = daphnet_reference(), checks.Rules.parse({}), np.random.default_rng(12)
    spread = np.concatenate(daphnet_arrivals()).std(axis=0)
    caught = 0
    for rows in daphnet_arrivals()[100:110]:
        rows = rows.copy()
        start = int(rng.integers(0, len(rows) - 3))
        rows[start:start + 3] += rng.normal(0, 5 * spread, (3, len(CHANNELS))).astype(np.float32)  # 3 of 64 rows
        caught += bool(checks.assess(rows_profile(rows), reference, rules, CHANNELS).findings)
    assert caught == 0


def test_actions_come_from_the_rules_per_check_and_per_feature():
    reference, rng = daphnet_reference(), np.random.default_rng(13)
    rows = daphnet_arrivals()[105]
    broken = faulty("x1000", rows, rng)
    warned = checks.assess(broken, reference, checks.Rules.parse({"scale_change": {"action": "warn"}}), CHANNELS)
    assert warned.status == "warned" and warned.findings[0].action == "warn"
    rejected = checks.assess(broken, reference, checks.Rules.parse({"action": "reject"}), CHANNELS)
    assert rejected.status == "quarantined" and [f.check for f in rejected.rejected] == ["scale_change"]
    # the scale check off for that feature, or its factor out of reach: the drift check still sees it
    # (and gain_change: x1000 is far outside the spread clean arrivals gave it against the other channels)
    off = checks.Rules.parse({"features": {"leg_vert": {"scale_change": {"action": "off"}}}})
    assert [(f.check, f.feature) for f in checks.assess(broken, reference, off, CHANNELS).findings] == \
        [("gain_change", "leg_vert")]
    by_index = checks.Rules.parse({"features": {"4": {"scale_change": {"factor": 5000},
                                                      "gain_change": {"action": "off"}}}})
    assert [(f.check, f.feature) for f in checks.assess(broken, reference, by_index).findings] == [("drift", "4")]
    both_off = checks.Rules.parse({"features": {"leg_vert": {"scale_change": {"action": "off"},
                                                             "gain_change": {"action": "off"},
                                                             "drift": {"action": "off"}}}})
    assert checks.assess(broken, reference, both_off, CHANNELS).findings == ()
    unset = checks.Rules.parse(None, default_action="warn")  # no arrival.checks in the spec: flagged, trained on
    assert checks.assess(broken, reference, unset, CHANNELS).status == "warned"


def test_bad_rules_name_the_path_and_the_reason():
    with pytest.raises(Invalid, match=r"arrival.checks.drift.action: 'hold' is not one of"):
        checks.Rules.parse({"drift": {"action": "hold"}})
    with pytest.raises(Invalid, match=r"arrival.checks.features.x.skew: not a check"):
        checks.Rules.parse({"features": {"x": {"skew": {}}}})


def test_js_divergence_bounds():
    p = np.array([1.0, 2.0, 3.0, 0.0])
    assert checks.js_divergence(p, p) == 0.0
    assert checks.js_divergence(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)
    assert 0 < checks.js_divergence(p, np.array([3.0, 2.0, 1.0, 0.0])) < 1


def test_a_spec_sets_the_checks_and_the_converter_gets_them_as_canonical_json():
    from landfall.core.artifacts import specs

    doc = {"apiVersion": "landfall.dataset/v1", "name": "gait",
           "arrival": {"checks": {"action": "warn", "drift": {"threshold": 0.9},
                                  "features": {"leg_vert": {"scale_change": {"factor": 100, "action": "reject"}}}}}}
    fields = specs.DatasetSpec.from_document(specs.validate(doc, "gait.yaml"), 3).converter_fields()
    rules = checks.Rules.parse(fields["checks"])
    assert rules.action == "warn" and rules.rule("drift", "x", 0)["threshold"] == 0.9
    assert rules.rule("scale_change", "leg_vert", 4) == {"factor": 100, "action": "reject"}
    bad = {**doc, "arrival": {"checks": {"drift": {"action": "hold"}}}}
    with pytest.raises(Invalid, match=r"gait.yaml.*arrival.checks.drift.action"):
        specs.validate(bad, "gait.yaml")


def test_detection_over_94_real_arrivals_as_docs_datasets_md_reports():
    """Each fault injected alone into every Daphnet second from the 17th on, checked against the reference of the
    seconds before it: the table in docs/datasets.md#arrival-checks."""
    rules, rng = checks.Rules.parse({}), np.random.default_rng(0)
    arrivals = daphnet_arrivals()
    spread = np.concatenate(arrivals).std(axis=0)
    named = {kind: 0 for kind in FAULTS}
    flagged = {kind: 0 for kind in FAULTS}
    contaminated = checked = 0
    reference = Profile(len(CHANNELS))
    for i, rows in enumerate(arrivals):
        if i >= 16:
            checked += 1
            for kind, (check, feature) in FAULTS.items():
                found = checks.assess(faulty(kind, rows, rng), reference, rules, CHANNELS).findings
                named[kind] += [(f.check, f.feature) for f in found] == [(check, feature)]
                flagged[kind] += bool(found)
            burst = rows.copy()
            at = int(rng.integers(0, len(burst) - 3))
            burst[at:at + 3] += rng.normal(0, 5 * spread, (3, len(CHANNELS))).astype(np.float32)
            contaminated += bool(checks.assess(rows_profile(burst), reference, rules, CHANNELS).findings)
        reference.merge(rows_profile(rows))
    assert checked == 94
    # missing 30 %: 93 alone; the other also flags gain_change on ankle_horiz_fwd (x2.55 against 2.5: the 70 % of
    # a lively second that was kept), beside missing_values on leg_vert
    assert named == {"x1000": 94, "constant": 94, "swapped": 93, "missing 30%": 93}
    assert flagged == {kind: 94 for kind in FAULTS}
    assert contaminated == 9  # 8 before #39; one more by a check against what clean arrivals showed


def _millisecond_arrival() -> tuple[Profile, Profile]:
    """A Daphnet second stamped in milliseconds, and the reference of the 20 clean seconds before it (timed)."""
    from tests.landfall.core import faults

    rec = faults.daphnet()
    reference = Profile(len(CHANNELS))
    for times, rows in rec.arrivals[:20]:
        reference.merge(faults.profile_of(times, rows))
    times, rows = rec.arrivals[20]
    return faults.profile_of(times * 1000.0, rows), reference


def test_sampling_interval_takes_its_own_settings_not_the_first_channels():
    """#39: the action of ``sampling_interval`` (a finding on the arrival as a whole, feature ``time``) is the
    dataset's setting for that check, never the first channel's per-feature settings."""
    arrival, reference = _millisecond_arrival()
    found = checks.assess(arrival, reference, checks.Rules.parse({}), CHANNELS)
    assert [(f.check, f.feature, f.index, f.action) for f in found.findings] == \
        [("sampling_interval", "time", -1, "quarantine")]
    # the first channel's settings leave it alone, whatever they say
    first_off = checks.Rules.parse({"features": {CHANNELS[0]: {c: {"action": "off"} for c in
                                                                 ("drift", "scale_change", "gain_change")},
                                                 "0": {"drift": {"action": "warn"}}}})
    assert [(f.check, f.action) for f in checks.assess(arrival, reference, first_off, CHANNELS).findings] == \
        [("sampling_interval", "quarantine")]
    warn = checks.Rules.parse({"sampling_interval": {"action": "warn"}})
    assert checks.assess(arrival, reference, warn, CHANNELS).status == "warned"
    off = checks.Rules.parse({"action": "reject", "sampling_interval": {"action": "off"}})
    assert checks.assess(arrival, reference, off, CHANNELS).findings == ()
    reach = checks.Rules.parse({"sampling_interval": {"factor": 2000}})
    assert checks.assess(arrival, reference, reach, CHANNELS).findings == ()
    # a per-feature sampling_interval would be silently ignored: refused, saying where it goes
    with pytest.raises(Invalid, match=r"arrival.checks.features.time.sampling_interval: a check of the arrival as a "
                                      r"whole .*set arrival.checks.sampling_interval"):
        checks.Rules.parse({"features": {"time": {"sampling_interval": {"action": "off"}}}})


def test_min_envelope_arrivals_holds_the_checks_of_what_clean_arrivals_showed():
    arrival, reference = _millisecond_arrival()  # a reference of 20 arrivals
    assert checks.assess(arrival, reference, checks.Rules.parse({"min_envelope_arrivals": 21}), CHANNELS).findings \
        == ()
    assert checks.Rules.parse({"min_envelope_arrivals": 21}).min_envelope_arrivals == 21


NEW_CHECKS = {"gain_change": {"margin": 3.0, "action": "warn"}, "copied_channel": {"copy": 0.995, "action": "reject"},
              "correlation_change": {"margin": 2.0, "action": "off"},
              "sampling_interval": {"factor": 2.0, "action": "quarantine"}}


def test_a_spec_sets_the_checks_of_39_and_the_converter_reads_them_as_the_checks_do():
    """The schema accepts every setting of the checks of #39 as ``landfall.core.quality.checks`` reads them
    (dataset-wide,
    per feature but for ``sampling_interval``, and ``min_envelope_arrivals``), and refuses what they would not read."""
    from landfall.core.artifacts import specs

    per_feature = {k: v for k, v in NEW_CHECKS.items() if k not in checks.WHOLE}
    doc = {"apiVersion": "landfall.dataset/v1", "name": "gait",
           "arrival": {"checks": {**NEW_CHECKS, "min_envelope_arrivals": 12,
                                  "features": {"leg_vert": per_feature, "3": {"gain_change": {"margin": 4}}}}}}
    fields = specs.DatasetSpec.from_document(specs.validate(doc, "gait.yaml"), 3).converter_fields()
    rules = checks.Rules.parse(fields["checks"])
    assert rules.min_envelope_arrivals == 12
    for check, rule in NEW_CHECKS.items():
        assert rules.rule(check, "trunk_vert", 0) == rule
        assert rules.rule(check, "leg_vert", 4) == rule
    assert rules.rule("gain_change", "x", 3) == {"margin": 4, "action": "warn"}
    assert rules.rule("sampling_interval", checks.TIME, -1) == NEW_CHECKS["sampling_interval"]
    for bad, where in [({"gain_change": {"margin": 1}}, "arrival.checks.gain_change.margin"),
                       ({"copied_channel": {"copy": 1.5}}, "arrival.checks.copied_channel.copy"),
                       ({"correlation_change": {"margin": 0}}, "arrival.checks.correlation_change.margin"),
                       ({"sampling_interval": {"factor": 1}}, "arrival.checks.sampling_interval.factor"),
                       ({"sampling_interval": {"threshold": 2}}, "arrival.checks.sampling_interval"),
                       ({"gain_change": {"action": "hold"}}, "arrival.checks.gain_change.action"),
                       ({"min_envelope_arrivals": 0}, "arrival.checks.min_envelope_arrivals"),
                       ({"features": {"time": {"sampling_interval": {"factor": 2}}}},
                        "arrival.checks.features.time")]:
        with pytest.raises(Invalid, match=rf"gait.yaml.*{where}"):
            specs.validate({**doc, "arrival": {"checks": bad}}, "gait.yaml")


def test_the_arrival_checks_example_in_docs_datasets_md_is_a_valid_spec():
    """As a spec's YAML is read (``action: off`` is the action, not YAML 1.1's boolean)."""
    import re
    from pathlib import Path

    from landfall.core.artifacts import specs

    text = (Path(__file__).parents[3] / "docs" / "datasets.md").read_text()
    block = re.search(r"## Arrival checks.*?```yaml\n(.*?)```", text, re.S).group(1)
    doc = {"apiVersion": "landfall.dataset/v1", "name": "gait", **specs.parse(block, "datasets.md")}
    rules = checks.Rules.parse(specs.DatasetSpec.from_document(specs.validate(doc, "datasets.md"), 1)
                               .converter_fields()["checks"])
    assert set(rules.checks) == set(checks.CHECKS)
    assert rules.rule("flat_channel", "x", 3)["action"] == "off" and rules.min_envelope_arrivals == 10
