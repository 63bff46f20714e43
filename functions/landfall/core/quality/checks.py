"""The checks of one arrival's profile against its dataset's reference (``landfall.core.quality.profile``): data that
is well
formed but wrong. Pure functions: what to read and where the verdict goes is the arrival stage's
(``landfall.arrival.screen``).

Each finding names its check, the feature (by its channel name when the spec lists channels, else its index), what
was measured and the threshold it crossed, and the action the rules give it:

- ``drift``: the Jensen-Shannon divergence (base 2, so in [0, 1]) between the feature's distribution in the arrival and
  in the reference, on ``BINS`` bins of equal reference mass (the reference's deciles, read from its sketch) plus
  one bin below and one above everything the reference has seen. The distance TFDV's drift comparator and Vertex AI
  Model Monitoring (``DataDriftSpec``, its default for numeric features) use for numeric features.
- ``scale_change``: the feature's spread (standard deviation) is ``factor`` times above the highest spread one
  admitted arrival had, or as far below the lowest, or its mean moved by ``factor`` reference spreads or more: a
  unit change (volts to millivolts), a gain error. Measured against the envelope of normal arrivals' spreads, not the
  pooled spread, because real series change their spread by an order of magnitude between regimes (standing,
  running: docs/datasets.md#arrival-checks).
- ``flat_channel``: the feature repeats its previous value in at least ``run_fraction`` of its steps (a stuck
  sensor, a channel that sends zeros), where the reference repeats in less than half that share.
- ``swapped_channels``: two features each look like the other's reference (their crossed drifts together at most
  ``ratio`` times their own) while each drifted at least ``min_drift`` from its own. Two channels whose
  distributions are alike cannot be told apart this way (docs/datasets.md#arrival-checks).
- ``missing_values``: the share of missing or non-finite values rose by ``rise`` or more over the reference's
  (counted in the rows the converter dropped: ``arrival.drop_nonfinite``).

What clean arrivals showed (#39; measured by ``landfall.core.quality.structure``, judged once the reference holds
``min_envelope_arrivals`` arrivals, default 10, so an envelope of three arrivals is not taken for the normal range):

- ``gain_change``: the feature's spread, relative to the arrival's typical channel, lies ``margin`` times or more
  outside the range clean arrivals showed: a gain change under ``scale_change``'s fixed factor (g to m/s^2, x9.81).
- ``copied_channel``: two features correlate ``copy`` or more (in magnitude) where no clean arrival's did: one
  sensor's values in two columns. Named both.
- ``correlation_change``: pairs whose correlation left the clean arrivals' range by ``margin`` in Fisher's z; named
  by the channel most of them share (a polarity flip, a channel from another moment or sensor), or both of a pair.
- ``sampling_interval``: a series' median time step ``factor`` times off the reference's either way (decimated,
  upsampled, re-clocked: seconds against milliseconds; the steps' spread, q90/q10, is in the line); or most
  channels moving per step outside what clean arrivals showed, by ``factor`` (every second row stamped at the old
  rate). One finding for the arrival, its feature ``time``, the measured and the expected interval.

Rules (the spec's ``arrival.checks``, ``rules``): each check ``{action, <its threshold>}``, a default ``action`` for
all of them, and ``features: {<name or index>: {<check>: {...}}}`` per feature. Actions: ``quarantine`` (written,
not trained on until admitted), ``warn`` (trained on, logged and counted), ``reject`` (the arrival's rejection
record), ``off``. Until the reference holds ``min_reference_rows`` values per feature from ``min_reference_arrivals``
arrivals, nothing is checked: the arrival is admitted and says so (``first``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from landfall.core.errors import Invalid
from landfall.core.quality import structure
from landfall.core.quality.profile import Profile, bucket_value

ACTIONS = ("quarantine", "warn", "reject", "off")
CHECKS = ("drift", "scale_change", "flat_channel", "swapped_channels", "missing_values", "gain_change",
          "copied_channel", "correlation_change", "sampling_interval")
BINS = 10
# The defaults (docs/datasets.md#arrival-checks says how they were chosen: no flag over 265 clean real arrivals).
DEFAULTS: dict[str, dict[str, Any]] = {
    "drift": {"threshold": 0.75},
    "scale_change": {"factor": 10.0},
    "flat_channel": {"run_fraction": 0.9},
    "swapped_channels": {"ratio": 0.6, "min_drift": 0.3},
    "missing_values": {"rise": 0.05},
    # #39, each margin above the largest value clean arrivals showed (docs/datasets.md#arrival-checks)
    "gain_change": {"margin": 2.5},
    "copied_channel": {"copy": 0.99},
    "correlation_change": {"margin": 1.5},
    "sampling_interval": {"factor": 1.5},
}
THRESHOLD_KEY = {"drift": "threshold", "scale_change": "factor", "flat_channel": "run_fraction",
                 "swapped_channels": "ratio", "missing_values": "rise", "gain_change": "margin",
                 "copied_channel": "copy", "correlation_change": "margin", "sampling_interval": "factor"}
MIN_REFERENCE_ROWS = 1000
MIN_REFERENCE_ARRIVALS = 3
MIN_ENVELOPE_ARRIVALS = 10  # clean arrivals before the checks against what they showed run
TIME = "time"  # the feature a sampling finding names
WHOLE = ("sampling_interval",)  # checks of the arrival as a whole: set for the dataset only, never per feature
# Status of an arrival: first (no reference yet: admitted), admitted, warned (trained on), quarantined.
STATUSES = ("first", "admitted", "warned", "quarantined")


@dataclasses.dataclass(frozen=True)
class Finding:
    check: str
    feature: str
    measured: float
    threshold: float
    action: str
    detail: str
    index: int = -1  # the feature's index (of a swapped pair, the first)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        return f"{self.check} on {self.feature}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Rules:
    """The spec's ``arrival.checks`` over ``DEFAULTS``; ``action`` is the action of a check that sets none."""

    action: str = "quarantine"
    checks: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    features: Mapping[str, Mapping[str, Mapping[str, Any]]] = dataclasses.field(default_factory=dict)
    min_reference_rows: int = MIN_REFERENCE_ROWS
    min_reference_arrivals: int = MIN_REFERENCE_ARRIVALS
    min_envelope_arrivals: int = MIN_ENVELOPE_ARRIVALS

    @classmethod
    def parse(cls, text: str | Mapping[str, Any] | None, *, default_action: str = "quarantine") -> Rules:
        """From the spec's ``arrival.checks`` (a mapping, or its JSON as ``ConverterConfig.checks`` holds it).

        Without any (``None`` or ``""``) every check runs with the defaults and ``default_action``."""
        if text is None or text == "":
            return cls(action=default_action)
        raw = json.loads(text) if isinstance(text, str) else dict(text)
        if not isinstance(raw, Mapping):
            raise Invalid(f"arrival.checks: must be an object, not {type(raw).__name__}")
        action = raw.get("action", "quarantine")
        checks = {k: dict(raw[k]) for k in CHECKS if k in raw}
        features = {str(k): {c: dict(v) for c, v in dict(per).items()}
                    for k, per in dict(raw.get("features", {})).items()}
        for where, table in [("", checks), *[(f"features.{k}.", v) for k, v in features.items()]]:
            for name, rule in table.items():
                if name not in CHECKS:
                    raise Invalid(f"arrival.checks.{where}{name}: not a check (one of {', '.join(CHECKS)})")
                if where and name in WHOLE:
                    raise Invalid(f"arrival.checks.{where}{name}: a check of the arrival as a whole (its finding "
                                  f"names {TIME}): set arrival.checks.{name}")
                if rule.get("action", action) not in ACTIONS:
                    raise Invalid(f"arrival.checks.{where}{name}.action: {rule.get('action')!r} is not one of "
                                  f"{ACTIONS}")
        if action not in ACTIONS:
            raise Invalid(f"arrival.checks.action: {action!r} is not one of {ACTIONS}")
        return cls(action=action, checks=checks, features=features,
                   min_reference_rows=int(raw.get("min_reference_rows", MIN_REFERENCE_ROWS)),
                   min_reference_arrivals=int(raw.get("min_reference_arrivals", MIN_REFERENCE_ARRIVALS)),
                   min_envelope_arrivals=int(raw.get("min_envelope_arrivals", MIN_ENVELOPE_ARRIVALS)))

    def rule(self, check: str, feature: str, index: int) -> dict[str, Any]:
        """The check's settings for one feature: the defaults, then the dataset's, then the feature's (a check of the
        arrival as a whole, ``WHOLE``, has the dataset's alone)."""
        out = {**DEFAULTS[check], "action": self.action, **self.checks.get(check, {})}
        if check in WHOLE:
            return out
        for key in (feature, str(index)):
            if key in self.features:
                out.update(self.features[key].get(check, {}))
                break
        return out


@dataclasses.dataclass(frozen=True)
class Assessment:
    status: str  # one of STATUSES
    findings: tuple[Finding, ...]
    reference: dict[str, Any]  # {arrivals, rows, generation}: what it was checked against

    @property
    def rejected(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.action == "reject")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reference": self.reference, "findings": [f.to_dict() for f in self.findings]}


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence, base 2 (0: the same distribution, 1: disjoint); counts or probabilities."""
    p = p / p.sum()
    q = q / q.sum()
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        at = a > 0
        return float((a[at] * np.log2(a[at] / m[at])).sum())

    return max(0.0, (kl(p) + kl(q)) / 2)


def coarse(arrival: Profile, a: int, reference: Profile, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Arrival feature ``a`` and reference feature ``r`` on the reference's coarse bins: (edges, arrival counts,
    reference counts). Bin 0 holds what lies below everything the reference saw, the last bin what lies above; bin
    ``i`` between holds values up to ``edges[i]`` (a bucket's value, ``landfall.core.quality.profile.bucket_value``).
    None
    when either has no values."""
    ref_index, ref_counts = reference.histogram(r)
    index, counts = arrival.histogram(a)
    if not ref_counts.sum() or not counts.sum():
        return None
    cum = np.cumsum(ref_counts) / ref_counts.sum()
    cuts = np.unique(ref_index[np.minimum(np.searchsorted(cum, np.arange(1, BINS) / BINS), len(ref_index) - 1)])
    uppers = np.unique(np.append(cuts, ref_index[-1]))  # each reference bin's highest bucket

    def binned(idx: np.ndarray, n: np.ndarray) -> np.ndarray:
        group = np.where(idx < ref_index[0], 0, np.where(idx > ref_index[-1], len(uppers) + 1,
                                                          1 + np.searchsorted(uppers, idx, side="left")))
        return np.bincount(group, weights=n, minlength=len(uppers) + 2)

    return bucket_value(uppers), binned(index, counts), binned(ref_index, ref_counts)


def drift(arrival: Profile, a: int, reference: Profile, r: int) -> float:
    """The JS divergence of arrival feature ``a`` against reference feature ``r`` on the reference's coarse bins."""
    bins = coarse(arrival, a, reference, r)
    return 0.0 if bins is None else js_divergence(bins[1], bins[2])


def assess(arrival: Profile, reference: Profile | None, rules: Rules, names: Sequence[str] = (),
           generation: int | None = None) -> Assessment:
    """The findings for ``arrival`` against ``reference``; ``first`` while the reference is too small."""
    names = list(names) if len(names) == arrival.features else [str(i) for i in range(arrival.features)]
    ref_info = {"arrivals": reference.arrivals if reference else 0, "rows": reference.rows if reference else 0,
                "generation": generation}
    if (reference is None or reference.features != arrival.features or reference.arrivals < rules.min_reference_arrivals
            or reference.rows < rules.min_reference_rows):
        return Assessment("first", (), ref_info)
    findings: list[Finding] = []

    def add(check: str, f: int, measured: float, threshold: float, detail: str, feature: str | None = None) -> bool:
        """Records the finding unless the check is off for this feature (``f`` -1: the arrival as a whole, feature
        ``TIME``); whether it did."""
        action = rules.rule(check, names[f] if f >= 0 else TIME, f)["action"]
        if action != "off":
            findings.append(Finding(check, feature or names[f], round(float(measured), 6), float(threshold), action,
                                    detail, f))
        return action != "off"

    own = np.array([drift(arrival, f, reference, f) for f in range(arrival.features)])
    a_std, r_std = arrival.std(), reference.std()
    a_mean, r_mean = arrival.mean(), reference.mean()
    a_rep, r_rep = arrival.repeat_fraction(), reference.repeat_fraction()
    a_miss, r_miss = arrival.missing_fraction(), reference.missing_fraction()
    swaps = _swaps(arrival, reference, own, rules, names)
    swapped = {f for pair in swaps for f in pair[:2]}
    envelope = reference.arrivals >= rules.min_envelope_arrivals
    copied = _copies(arrival, reference, rules, names, add) if envelope else set()
    gains = structure.gain_factor(arrival, reference) if envelope else np.full(arrival.features, np.nan)
    for f, name in enumerate(names):
        rule = lambda check, f=f, name=name: rules.rule(check, name, f)  # noqa: E731
        if rule("missing_values")["action"] != "off":
            rise = rule("missing_values")["rise"]
            if a_miss[f] - r_miss[f] >= rise:
                add("missing_values", f, a_miss[f] - r_miss[f], rise,
                    f"{a_miss[f]:.1%} of its values missing or non-finite, the reference {r_miss[f]:.1%} "
                    f"(a rise of at least {rise:.1%} is flagged)")
        flat = rule("flat_channel")["run_fraction"]
        stuck = np.isfinite(a_rep[f]) and a_rep[f] >= flat and not (np.isfinite(r_rep[f]) and r_rep[f] >= flat / 2)
        if (stuck or (a_std[f] == 0 and r_std[f] > 0 and arrival.values[f] > 1)) and add(
                "flat_channel", f, a_rep[f] if np.isfinite(a_rep[f]) else 1.0, flat,
                f"repeats its previous value in {a_rep[f]:.1%} of its steps (spread {a_std[f]:.4g}), the reference "
                f"in {r_rep[f]:.1%} (spread {r_std[f]:.4g})"):
            continue  # a flat channel drifts and changes scale too: one finding says it
        if f in swapped or f in copied:
            continue  # so does each of two swapped or copied channels: the pair's finding says it
        factor = rule("scale_change")["factor"]
        measured = _scale(a_std[f], a_mean[f], reference, r_std[f], r_mean[f], f)
        if measured >= factor and add(
                "scale_change", f, measured, factor,
                f"spread {a_std[f]:.4g} and mean {a_mean[f]:.4g} against the reference's {r_std[f]:.4g} and "
                f"{r_mean[f]:.4g} (one arrival's spread from {reference.spread_low[f]:.4g} to "
                f"{reference.spread_high[f]:.4g}): x{measured:.3g} off (x{factor:g} or more is flagged)"):
            continue  # a unit change drifts too
        margin = rule("gain_change")["margin"]
        if np.isfinite(gains[f]) and gains[f] >= margin and add(
                "gain_change", f, gains[f], margin,
                f"spread {a_std[f]:.4g} against the reference's {r_std[f]:.4g}: relative to the other channels, "
                f"x{gains[f]:.3g} outside the range clean arrivals showed (x{margin:g} or more is flagged)"):
            continue
        threshold = rule("drift")["threshold"]
        if own[f] >= threshold:
            add("drift", f, own[f], threshold,
                f"Jensen-Shannon divergence {own[f]:.3f} from the reference (threshold {threshold:g})")
    for f, g, crossed, direct, ratio in swaps:
        add("swapped_channels", f, crossed / max(direct, 1e-12), ratio,
            f"{names[f]} and {names[g]} each match the other's reference: crossed divergence {crossed:.3f} against "
            f"{direct:.3f} unswapped (ratio {ratio:g} or below is flagged)", feature=f"{names[f]},{names[g]}")
    if envelope:
        _correlation_changes(arrival, reference, rules, names, add, skip=copied | swapped)
        _sampling(arrival, reference, rules, add)
    status = "admitted"
    if any(x.action == "warn" for x in findings):
        status = "warned"
    if any(x.action in ("quarantine", "reject") for x in findings):
        status = "quarantined"
    return Assessment(status, tuple(findings), ref_info)


def _scale(a_std: float, a_mean: float, reference: Profile, r_std: float, r_mean: float, f: int) -> float:
    """How many times the arrival's spread lies outside the spreads normal arrivals had (``spread_low`` to
    ``spread_high``), or its mean away from the reference's, in the reference's spreads: 1 inside the envelope."""
    low, high = reference.spread_low[f], reference.spread_high[f]
    if not (np.isfinite(low) and np.isfinite(high)):
        low = high = r_std
    above = a_std / high if high > 0 else (np.inf if a_std > 0 else 1.0)
    below = low / a_std if a_std > 0 else (np.inf if low > 0 else 1.0)
    shift = abs(a_mean - r_mean) / r_std if r_std > 0 else 0.0
    return float(max(above, below, shift, 1.0))


def _swaps(arrival: Profile, reference: Profile, own: np.ndarray, rules: Rules,
           names: Sequence[str]) -> list[tuple[int, int, float, float, float]]:
    """Pairs (f, g), each drifted ``min_drift`` or more, whose crossed drifts are at most ``ratio`` of their own."""
    out = []
    taken: set[int] = set()
    suspects = [f for f in range(arrival.features)
                if own[f] >= rules.rule("swapped_channels", names[f], f)["min_drift"]]
    for i, f in enumerate(suspects):
        for g in suspects[i + 1:]:
            if f in taken or g in taken:
                continue
            rule = rules.rule("swapped_channels", names[f], f)
            if rule["action"] == "off":
                continue
            direct = own[f] + own[g]
            crossed = drift(arrival, f, reference, g) + drift(arrival, g, reference, f)
            if crossed <= rule["ratio"] * direct:
                out.append((f, g, crossed, direct, float(rule["ratio"])))
                taken |= {f, g}
    return out


def _copies(arrival: Profile, reference: Profile, rules: Rules, names: Sequence[str], add: Any) -> set[int]:
    """``copied_channel`` findings (both features named); the features they name."""
    out: set[int] = set()
    threshold = min(float(rules.rule("copied_channel", n, f)["copy"]) for f, n in enumerate(names))
    for f, g, measured, seen in structure.copies(arrival, reference, threshold):
        copy = float(rules.rule("copied_channel", names[f], f)["copy"])
        if f in out or g in out or measured < copy:
            continue
        if add("copied_channel", f, measured, copy,
               f"{names[f]} and {names[g]} correlate {measured:.4f}, as one sensor's values in two columns would; "
               f"no clean arrival's passed {seen:.3f} (|corr| {copy:g} or more is flagged)",
               feature=f"{names[f]},{names[g]}"):
            out |= {f, g}
    return out


def _correlation_changes(arrival: Profile, reference: Profile, rules: Rules, names: Sequence[str], add: Any,
                         skip: set[int]) -> None:
    margin = min(float(rules.rule("correlation_change", n, f)["margin"]) for f, n in enumerate(names))
    shifts = structure.pair_shifts(arrival, reference, margin, skip)
    for channel, pairs in structure.by_channel(shifts):
        worst = max(pairs, key=lambda s: s.beyond)
        f = channel if channel is not None else worst.f
        own = float(rules.rule("correlation_change", names[f], f)["margin"])
        if worst.beyond < own:
            continue
        said = "; ".join(f"with {names[s.g if s.f == f else s.f]} {s.measured:+.2f} (clean {s.low:+.2f} to "
                         f"{s.high:+.2f})" for s in sorted(pairs, key=lambda s: -s.beyond)[:4])
        more = f" and {len(pairs) - 4} more" if len(pairs) > 4 else ""
        feature = names[f] if channel is not None else f"{names[worst.f]},{names[worst.g]}"
        add("correlation_change", f, worst.beyond, own,
            f"its correlation {said}{more}: {worst.beyond:.2f} beyond what clean arrivals showed, in Fisher's z "
            f"({own:g} or more is flagged)", feature=feature)


def _sampling(arrival: Profile, reference: Profile, rules: Rules, add: Any) -> None:
    rule = rules.rule("sampling_interval", TIME, -1)
    factor = float(rule["factor"])
    if rule["action"] == "off":
        return
    s = structure.sampling(arrival, reference, factor)
    timed = np.isfinite(s.step) and np.isfinite(s.expected) and s.expected > 0
    ratio = s.step / s.expected if timed else 1.0
    # the steps' spread is said, not judged: rows dropped for a missing value (drop_nonfinite) widen it, and
    # missing_values already says so
    if timed and max(ratio, 1 / ratio) >= factor:
        measured = max(ratio, 1 / ratio)
        what = "decimated or re-clocked" if ratio > 1 else "upsampled or re-clocked"
        add("sampling_interval", -1, measured, factor,
            f"median step {s.step:.4g} (q90/q10 {s.spread:.3g}), the reference's {s.expected:.4g} "
            f"(q90/q10 {s.expected_spread:.3g}): x{measured:.3g} off, {what} (x{factor:g} is flagged)", feature=TIME)
        return
    if s.channels >= 2 and abs(s.outside) * 2 > s.channels:
        interval = f"every {s.expected * s.pace:.4g}, not {s.expected:.4g}" if timed else \
            f"x{s.pace:.3g} the reference's interval"
        add("sampling_interval", -1, max(s.pace, 1 / s.pace), factor,
            f"{abs(s.outside)} of {s.channels} channels move {'more' if s.outside > 0 else 'less'} per step than any "
            f"clean arrival's (x{factor:g} beyond): the pace of a series sampled {interval} under the same time "
            f"stamps ({'decimated' if s.outside > 0 else 'upsampled'}?)", feature=TIME)
