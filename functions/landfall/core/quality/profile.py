"""An arrival's profile (``landfall.profile/v1``): per feature, a mergeable sketch of its distribution, its moments,
its missing and non-finite values and how often it repeats itself; and a dataset's reference, the merge of the
profiles of its admitted arrivals.

The sketch is a **log-bucketed histogram on fixed edges** (DDSketch's mapping: Masson, Rim, Lee, "DDSketch: a fast
and fully-mergeable quantile sketch with relative-error guarantees", VLDB 2019). A value ``x`` falls in bucket
``sign(x) * (ceil(log_gamma |x|) + OFFSET)``, ``gamma = (1 + a) / (1 - a)`` with ``a = ALPHA`` (5 %: any quantile
read back is within 5 % of a true value); ``|x| < MIN_ABS`` is the zero bucket. The edges are the same for every
arrival of every dataset, so two profiles merge by adding counts (exactly, in any order, by any process: the
converter's prefetch thread, Cloud Run tasks, the reference's update), no arrival needs its dataset's reference
before it is read, and the bucket index is monotone in the value, so quantiles (and the coarse bins a check
compares on, ``landfall.core.quality.checks``) come straight from the cumulative counts. A feature's histogram holds
only
its non-empty buckets: at most about 2 x 23 per decade its values span (below 2 x 1,300 in all).

What is measured on every value, and what on a sample: the moments (count, mean, M2, min, max: the converter's
``RunningStats``, exact), the missing (NaN) and non-finite (+-Inf) counts (exact: they are counted in the rows the
converter drops, ``LANDFALL_DROP_NONFINITE=true``; otherwise such an arrival is rejected anyway) and the values seen
are exact. The histogram and the constant-run fraction (the share of steps, consecutive timesteps of one instance or
consecutive rows of a series, where a feature did not change at all) are taken on a systematic sample: an arrival's
first ``HEAD_INSTANCES`` instances (or blocks of ``BLOCK_ROWS`` rows of a series), then one in ``SAMPLE_EVERY``, so a
small arrival is profiled whole and a large one costs the converter a small, fixed share of its time (``landfall
bench convert`` measures it).

Beyond one feature at a time (#39), also on the sample: the **steps' dynamics**, per feature the sum of squared
differences between consecutive sampled values (``diff2``; with the sampled steps, how far a channel moves per step
relative to its spread: the pace a sampling change alters), the **co-moments of every pair of features** (their means
and the centred cross-products of the sampled rows, merged as Chan et al. merge moments; up to ``PAIR_LIMIT``
features, beyond which the pair structure is not kept: its size and cost grow as features squared), and for a
series the **time steps** (every step of the time column, in the same log buckets: its median and spread within 5 %).
And per arrival, kept as an envelope (lowest and highest one admitted arrival showed, so merging takes the minimum
and the maximum, in any order): each feature's spread relative to the arrival's typical channel (``log std - median
log std``: a gain on one channel moves it, a regime that scales every channel does not), each feature's roughness
(``log`` of its mean squared step over its variance) and each pair's correlation. The checks
(``landfall.core.quality.checks``) accept what lies within those envelopes plus a margin measured on clean arrivals.

Size: bounded whatever the data (the buckets per feature are bounded, the rest is a few numbers per feature), so
the reference, the merge of every admitted arrival, stays as small as one arrival's profile.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np

from landfall.core.errors import Invalid

SCHEMA = "landfall.profile/v1"
REFERENCE_SCHEMA = "landfall.reference/v1"
ALPHA = 0.05  # relative accuracy of the buckets
GAMMA = (1 + ALPHA) / (1 - ALPHA)
LN_GAMMA = math.log(GAMMA)
MIN_ABS = 1e-12  # smaller magnitudes are the zero bucket
OFFSET = 600  # keys of |x| in [MIN_ABS, float32 max] run from -276 to 888: + OFFSET keeps them >= 1
MAX_KEY = 900
SPAN = 2 * (OFFSET + MAX_KEY) + 1  # distinct buckets per feature
HEAD_INSTANCES = 64  # an arrival's first instances are all sampled ...
SAMPLE_EVERY = 128  # ... then one instance in this many
BLOCK_ROWS = 64  # a series' rows are sampled in blocks of this many consecutive rows (its "instances")
DENSE_LIMIT = 1 << 20  # while an arrival is read, its buckets are counted in place when features x SPAN is at most
# this (8 MiB of counts: up to 349 features); wider arrivals count each sample's buckets by sorting
PAIR_LIMIT = 384  # features up to which pair co-moments are kept (features^2 / 2 numbers: 300 features, 45,150)
PAIR_STRIDE_FEATURES = 64  # above this many features, the co-moments take every ceil(F / 64)-th sampled row
MIN_PAIR_ROWS = 32  # sampled rows before a correlation is read back (nan below)
PENDING_VALUES = 1 << 16  # sampled values are bucketed in batches of about this many (512 KiB as float64): a
# bucketing pass has a fixed cost (a count over every feature's buckets), which a CSV chunk of a few hundred
# instances, two or three of them sampled, would otherwise pay each time


def bucket(values: np.ndarray) -> np.ndarray:
    """The bucket index of each value (int64, monotone in the value; 0 the zero bucket)."""
    mag = np.abs(values)
    with np.errstate(divide="ignore", over="ignore"):
        key = np.ceil(np.log(np.maximum(mag, MIN_ABS)) * (1 / LN_GAMMA))
    key = np.clip(key, -OFFSET + 1, MAX_KEY).astype(np.int64) + OFFSET
    out = np.where(mag < MIN_ABS, 0, key)
    return np.where(values < 0, -out, out)


def bucket_value(index: np.ndarray | int) -> np.ndarray:
    """Each bucket's value: within ``ALPHA`` (relative) of every value it holds (DDSketch's ``2 gamma^k / (1 +
    gamma)``; the zero bucket: 0)."""
    index = np.asarray(index, dtype=np.int64)
    mag = np.where(index == 0, 0.0, 2 * GAMMA ** (np.abs(index) - OFFSET).astype(np.float64) / (1 + GAMMA))
    return np.where(index < 0, -mag, mag)


class Profile:
    """One arrival's profile while it is read (``update``, ``dropped``), or a merge of several (``merge``)."""

    def __init__(self, features: int):
        self.features = features
        self.arrivals = 0
        self._codes = np.zeros(0, dtype=np.int64)  # feature * SPAN + bucket + SPAN // 2, sorted
        self._counts = np.zeros(0, dtype=np.int64)
        self._dense: np.ndarray | None = None  # counts by code while reading, folded into _codes when read
        self._pending: list[np.ndarray] = []  # sampled values (n, F) not yet bucketed
        self._pending_values = 0
        self.sampled = np.zeros(features, dtype=np.int64)  # values in the histogram
        self.steps = np.zeros(features, dtype=np.int64)  # consecutive pairs sampled
        self.repeats = np.zeros(features, dtype=np.int64)  # ... of which equal
        self.values = np.zeros(features, dtype=np.int64)  # every value read, dropped rows included
        self.missing = np.zeros(features, dtype=np.int64)  # NaN (an empty cell, NA ...)
        self.nonfinite = np.zeros(features, dtype=np.int64)  # +-Inf
        self.moments: dict[str, Any] | None = None  # RunningStats.to_dict: n, mean, m2, min, max
        self._instances = 0  # instances (or series blocks) seen by update: where the sample is
        # The lowest and highest spread (standard deviation) of one arrival merged here: the range a normal
        # arrival's spread has taken, which a scale change is measured against (landfall.core.quality.checks).
        self.spread_low = np.full(features, np.inf)
        self.spread_high = np.full(features, -np.inf)
        self.diff2 = np.zeros(features)  # sum of squared differences over the sampled steps
        self.time_steps: np.ndarray | None = None  # counts of a series' time steps by bucket (series only)
        self.pair_n = 0  # sampled rows in the co-moments
        self.pair_mean = np.zeros(features) if features <= PAIR_LIMIT else None
        self.pair_m2 = np.zeros((features, features)) if features <= PAIR_LIMIT else None
        # Per-arrival envelopes (lowest, highest one arrival showed; nan: none yet): see the module's docstring.
        self.relspread_low, self.relspread_high = np.full(features, np.nan), np.full(features, np.nan)
        self.rough_low, self.rough_high = np.full(features, np.nan), np.full(features, np.nan)
        self.corr_low = np.full((features, features), np.nan) if features <= PAIR_LIMIT else None
        self.corr_high = np.full((features, features), np.nan) if features <= PAIR_LIMIT else None

    # -- reading an arrival -----------------------------------------------------------------------------------
    def update(self, batch: np.ndarray) -> None:
        """Adds kept instances of shape (k, T, F) (finite values)."""
        if not len(batch):
            return
        self.values += batch.shape[0] * batch.shape[1]
        first, self._instances = self._instances, self._instances + len(batch)
        head = max(0, min(len(batch), HEAD_INSTANCES - first))
        if head:
            self._sample(batch[:head])
        start = max(first + head, HEAD_INSTANCES)
        offset = start + -(start - HEAD_INSTANCES) % SAMPLE_EVERY - first  # the next of HEAD + k * SAMPLE_EVERY
        if offset < len(batch):
            self._sample(batch[offset::SAMPLE_EVERY])

    def _sample(self, sample: np.ndarray) -> None:
        if sample.shape[1] > 1:
            diff = sample[:, 1:, :] - sample[:, :-1, :]
            self.repeats += (diff == 0).sum(axis=(0, 1))
            self.steps += diff.shape[0] * diff.shape[1]
            flat_diff = diff.reshape(-1, self.features)
            self.diff2 += np.einsum("ij,ij->j", flat_diff, flat_diff, dtype=np.float64)
        flat = sample.reshape(-1, self.features)
        self.sampled += flat.shape[0]
        self._pending.append(np.array(flat, copy=True))  # the caller may reuse its buffer
        self._pending_values += flat.size
        if self._pending_values >= PENDING_VALUES:
            self._bucket_pending()

    def _bucket_pending(self) -> None:
        if not self._pending:
            return
        flat = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        self._pending, self._pending_values = [], 0
        if self.pair_m2 is not None:
            self._add_pairs(flat)
        codes = (bucket(flat) + (np.arange(self.features, dtype=np.int64) * SPAN + SPAN // 2)).ravel()
        if self.features * SPAN <= DENSE_LIMIT:  # counted in place: no sort, no merge per batch
            if self._dense is None:
                self._dense = np.zeros(self.features * SPAN, dtype=np.int64)
            low = int(codes.min())
            counts = np.bincount(codes - low)
            self._dense[low:low + len(counts)] += counts
        else:
            self._add(*np.unique(codes, return_counts=True))

    def _add_pairs(self, flat: np.ndarray) -> None:
        """Adds sampled rows (n, F) to the pair co-moments (Chan et al.'s merge of a batch's centred products): every
        ``ceil(F / PAIR_STRIDE_FEATURES)``-th of them, so a sampled row costs at most about 64 x F multiply-adds, as
        its histogram does, whatever the width. The batch's product is taken in float32 around its own mean (exact
        enough for a correlation) and summed into float64; with numpy's own loop (``einsum``), not BLAS, whose
        threads spin on the cores the converter's threads need (a 300-channel ``.npy`` conversion measured 0.60x
        with BLAS's product, 1.0x single-threaded)."""
        x = flat[::-(-self.features // PAIR_STRIDE_FEATURES)]
        n = len(x)
        mean = x.mean(axis=0, dtype=np.float64)
        centred = (x - mean.astype(x.dtype)).astype(np.float32, copy=False)
        m2 = np.einsum("ij,ik->jk", centred, centred, optimize=False).astype(np.float64)
        self._merge_pairs(n, mean, m2)

    def _merge_pairs(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        assert self.pair_mean is not None and self.pair_m2 is not None
        if not n:
            return
        total = self.pair_n + n
        delta = mean - self.pair_mean
        self.pair_m2 = self.pair_m2 + m2 + np.outer(delta, delta) * (self.pair_n * n / total)
        self.pair_mean = self.pair_mean + delta * (n / total)
        self.pair_n = total

    def update_steps(self, steps: np.ndarray) -> None:
        """Adds steps of a series' time column (every step between consecutive rows; positive)."""
        steps = steps[steps > 0]
        if not len(steps):
            return
        counts = np.bincount(bucket(steps), minlength=OFFSET + MAX_KEY + 1)
        self.time_steps = counts if self.time_steps is None else self.time_steps + counts

    def update_rows(self, rows: np.ndarray) -> None:
        """Adds consecutive rows (n, F) of a series: sampled in blocks of ``BLOCK_ROWS`` rows."""
        whole = len(rows) // BLOCK_ROWS * BLOCK_ROWS
        if whole:
            self.update(rows[:whole].reshape(-1, BLOCK_ROWS, self.features))
        if whole < len(rows):
            self.update(rows[whole:][None])

    def dropped(self, batch: np.ndarray) -> None:
        """Counts the missing and non-finite values of instances (k, T, F) or rows (k, F) the converter dropped."""
        flat = batch.reshape(-1, self.features)
        self.values += flat.shape[0]
        self.missing += np.isnan(flat).sum(axis=0)
        self.nonfinite += np.isinf(flat).sum(axis=0)

    def finish(self, moments: dict[str, Any]) -> Profile:
        """Sets the exact moments (``RunningStats.to_dict``) of the kept values; an arrival's profile is done."""
        self.moments = moments
        self.arrivals = 1
        if moments and moments["n"]:
            self.spread_low = self.spread_high = self.std()
            self.relspread_low = self.relspread_high = self.relative_spread()
            self.rough_low = self.rough_high = self.roughness()
            if self.corr_low is not None:
                self.corr_low = self.corr_high = self.correlation()
        return self

    # -- merging ----------------------------------------------------------------------------------------------
    @property
    def codes(self) -> np.ndarray:
        """The non-empty buckets of every feature, ascending (``feature * SPAN + bucket + SPAN // 2``)."""
        self._fold()
        return self._codes

    @property
    def counts(self) -> np.ndarray:
        self._fold()
        return self._counts

    def _fold(self) -> None:
        self._bucket_pending()
        if self._dense is not None:
            dense, self._dense = self._dense, None
            filled = np.flatnonzero(dense)
            self._add(filled, dense[filled])

    def _add(self, codes: np.ndarray, counts: np.ndarray) -> None:
        if not len(self._codes):
            self._codes, self._counts = codes.astype(np.int64), counts.astype(np.int64)
            return
        both = np.concatenate([self._codes, codes])
        unique, inverse = np.unique(both, return_inverse=True)
        self._codes = unique
        self._counts = np.bincount(inverse, weights=np.concatenate([self._counts, counts]),
                                   minlength=len(unique)).astype(np.int64)

    def merge(self, other: Profile) -> Profile:
        """Adds ``other`` (as if its values had been read here)."""
        if other.features != self.features:
            raise Invalid(f"a profile of {other.features} features cannot merge into one of {self.features}")
        self._add(other.codes, other.counts)
        for name in ("sampled", "steps", "repeats", "values", "missing", "nonfinite"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.moments = merge_moments(self.moments, other.moments)
        self.spread_low = np.minimum(self.spread_low, other.spread_low)
        self.spread_high = np.maximum(self.spread_high, other.spread_high)
        self.diff2 = self.diff2 + other.diff2
        if other.time_steps is not None:
            self.time_steps = other.time_steps.copy() if self.time_steps is None else self.time_steps + other.time_steps
        if self.pair_m2 is not None and other.pair_m2 is not None:
            assert other.pair_mean is not None
            self._merge_pairs(other.pair_n, other.pair_mean, other.pair_m2)
        self.relspread_low, self.relspread_high = np.fmin(self.relspread_low, other.relspread_low), \
            np.fmax(self.relspread_high, other.relspread_high)
        self.rough_low, self.rough_high = np.fmin(self.rough_low, other.rough_low), \
            np.fmax(self.rough_high, other.rough_high)
        if self.corr_low is not None and other.corr_low is not None:
            self.corr_low, self.corr_high = np.fmin(self.corr_low, other.corr_low), \
                np.fmax(self.corr_high, other.corr_high)
        self.arrivals += other.arrivals
        return self

    # -- reading it back --------------------------------------------------------------------------------------
    def histogram(self, feature: int) -> tuple[np.ndarray, np.ndarray]:
        """(bucket indexes ascending, counts) of one feature."""
        lo, hi = feature * SPAN, (feature + 1) * SPAN
        at = (self.codes >= lo) & (self.codes < hi)
        return self.codes[at] - lo - SPAN // 2, self.counts[at]

    def quantile(self, feature: int, q: float) -> float:
        """A value within ``ALPHA`` (relative) of the feature's ``q`` quantile (nan without values)."""
        index, counts = self.histogram(feature)
        if not counts.sum():
            return float("nan")
        at = int(np.searchsorted(np.cumsum(counts), q * counts.sum(), side="left"))
        return float(bucket_value(index[min(at, len(index) - 1)]))

    @property
    def rows(self) -> int:
        """Values per feature read (kept and dropped)."""
        return int(self.values.max()) if len(self.values) else 0

    def mean(self) -> np.ndarray:
        return np.array(self.moments["mean"], dtype=float) if self.moments else np.full(self.features, np.nan)

    def std(self) -> np.ndarray:
        if not self.moments or not self.moments["n"]:
            return np.full(self.features, np.nan)
        return np.sqrt(np.array(self.moments["m2"], dtype=float) / self.moments["n"])

    def repeat_fraction(self) -> np.ndarray:
        """Per feature, the share of sampled steps where the value did not change (nan: no steps)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.steps > 0, self.repeats / np.maximum(self.steps, 1), np.nan)

    def relative_spread(self) -> np.ndarray:
        """Per feature, ``log`` of its spread less the median of every feature's (nan for a flat feature): a gain on
        one channel moves its value by ``log gain``; a change that scales every channel alike (a livelier regime)
        leaves it."""
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(self.std())
        logs = np.where(np.isfinite(logs), logs, np.nan)
        if np.isfinite(logs).sum() < 3:  # too few channels to tell one from the others
            return np.full(self.features, np.nan)
        return logs - np.nanmedian(logs)

    def roughness(self) -> np.ndarray:
        """Per feature, ``log`` of its mean squared step (sampled consecutive values) over its variance: how far it
        moves per step for its spread. Decimating a smooth signal by k multiplies it by about k^2 (noise: k^0)."""
        var = self.std() ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log(self.diff2 / np.maximum(self.steps, 1) / var)
        return np.where(np.isfinite(out) & (self.steps > 0), out, np.nan)

    def correlation(self) -> np.ndarray | None:
        """The features' correlation matrix on the sampled rows (nan where a feature is flat or too few rows were
        sampled); None beyond ``PAIR_LIMIT`` features."""
        if self.pair_m2 is None:
            return None
        self._fold()
        if self.pair_n < MIN_PAIR_ROWS:
            return np.full((self.features, self.features), np.nan)
        diag = np.sqrt(np.maximum(np.diag(self.pair_m2), 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            corr = self.pair_m2 / np.outer(diag, diag)
        flat = diag / math.sqrt(self.pair_n) <= 1e-9 * np.maximum(np.abs(self.pair_mean), 1.0)  # no spread to speak of
        corr[flat, :] = np.nan
        corr[:, flat] = np.nan
        return np.clip(corr, -1.0, 1.0)

    def step_quantile(self, q: float) -> float:
        """A value within ``ALPHA`` of the ``q`` quantile of a series' time steps (nan: none recorded)."""
        if self.time_steps is None or not self.time_steps.sum():
            return float("nan")
        at = int(np.searchsorted(np.cumsum(self.time_steps), q * self.time_steps.sum(), side="left"))
        return float(bucket_value(min(at, len(self.time_steps) - 1)))

    def missing_fraction(self) -> np.ndarray:
        """Per feature, the share of its values that were missing or non-finite."""
        return (self.missing + self.nonfinite) / np.maximum(self.values, 1)

    # -- JSON -------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        histograms = []
        for f in range(self.features):
            index, counts = self.histogram(f)
            histograms.append({"buckets": index.tolist(), "counts": counts.tolist()})
        return {"features": self.features, "arrivals": self.arrivals, "alpha": ALPHA, "offset": OFFSET,
                "histograms": histograms, "sampled": self.sampled.tolist(), "steps": self.steps.tolist(),
                "repeats": self.repeats.tolist(), "values": self.values.tolist(), "missing": self.missing.tolist(),
                "nonfinite": self.nonfinite.tolist(), "moments": self.moments,
                "spread": [None if not np.isfinite(lo) else [float(lo), float(hi)]
                           for lo, hi in zip(self.spread_low, self.spread_high, strict=True)],
                **self._structure_dict()}

    def _structure_dict(self) -> dict[str, Any]:
        """The steps' dynamics, the time steps, the pair co-moments and the per-arrival envelopes (#39). Square
        matrices are kept as their upper triangles, little-endian float64 in base64 (exact; a third of the text)."""
        self._fold()
        out: dict[str, Any] = {"diff2": self.diff2.tolist(), "relspread": [_nums(self.relspread_low),
                                                                          _nums(self.relspread_high)],
                               "roughness": [_nums(self.rough_low), _nums(self.rough_high)]}
        if self.time_steps is not None:
            at = np.flatnonzero(self.time_steps)
            out["time_steps"] = {"buckets": at.tolist(), "counts": self.time_steps[at].tolist()}
        if self.pair_m2 is not None and self.pair_mean is not None:
            assert self.corr_low is not None and self.corr_high is not None
            out["pairs"] = {"n": self.pair_n, "mean": self.pair_mean.tolist(), "m2": _pack(self.pair_m2),
                            "corr_low": _pack(self.corr_low), "corr_high": _pack(self.corr_high)}
        return out

    def _structure_from(self, raw: dict[str, Any], where: str) -> None:
        f = self.features
        if "diff2" in raw:
            self.diff2 = _vector(raw["diff2"], f, f"{where}: diff2")
        for name, (lo, hi) in (("relspread", ("relspread_low", "relspread_high")),
                               ("roughness", ("rough_low", "rough_high"))):
            if name in raw:
                setattr(self, lo, _vector(raw[name][0], f, f"{where}: {name}"))
                setattr(self, hi, _vector(raw[name][1], f, f"{where}: {name}"))
        if raw.get("time_steps"):
            steps = np.zeros(OFFSET + MAX_KEY + 1, dtype=np.int64)
            steps[np.asarray(raw["time_steps"]["buckets"], dtype=np.int64)] = raw["time_steps"]["counts"]
            self.time_steps = steps
        pairs = raw.get("pairs")
        if pairs and self.pair_m2 is not None:
            self.pair_n = int(pairs["n"])
            self.pair_mean = _vector(pairs["mean"], f, f"{where}: pairs.mean")
            self.pair_m2 = _unpack(pairs["m2"], f, f"{where}: pairs.m2")
            self.corr_low = _unpack(pairs["corr_low"], f, f"{where}: pairs.corr_low")
            self.corr_high = _unpack(pairs["corr_high"], f, f"{where}: pairs.corr_high")

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "profile") -> Profile:
        try:
            if raw.get("alpha") != ALPHA or raw.get("offset") != OFFSET:
                raise Invalid(f"{where}: buckets of alpha {raw.get('alpha')}, offset {raw.get('offset')}; this "
                              f"reader's are {ALPHA}, {OFFSET}")
            out = cls(int(raw["features"]))
            out.arrivals = int(raw["arrivals"])
            codes, counts = [], []
            for f, h in enumerate(raw["histograms"]):
                codes.append(np.asarray(h["buckets"], dtype=np.int64) + f * SPAN + SPAN // 2)
                counts.append(np.asarray(h["counts"], dtype=np.int64))
            if codes:
                out._codes, out._counts = np.concatenate(codes), np.concatenate(counts)
            for name in ("sampled", "steps", "repeats", "values", "missing", "nonfinite"):
                value = np.asarray(raw[name], dtype=np.int64)
                if value.shape != (out.features,):
                    raise Invalid(f"{where}: {name} has {value.size} entries for {out.features} features")
                setattr(out, name, value)
            out.moments = raw.get("moments")
            spread = raw.get("spread") or [None] * out.features
            if len(spread) != out.features:
                raise Invalid(f"{where}: spread has {len(spread)} entries for {out.features} features")
            out.spread_low = np.array([np.inf if s is None else s[0] for s in spread], dtype=float)
            out.spread_high = np.array([-np.inf if s is None else s[1] for s in spread], dtype=float)
            out._structure_from(raw, where)
            return out
        except Invalid:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Invalid(f"{where}: not a valid {SCHEMA}: {str(exc)[:200]}") from None

    def to_json(self, schema: str = SCHEMA, **extra: Any) -> bytes:
        return json.dumps({"schema": schema, **extra, **self.to_dict()}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, text: bytes | str, where: str = "profile") -> tuple[Profile, dict[str, Any]]:
        """The profile and the document it was read from (a reference's extra fields: ``recent``)."""
        try:
            raw = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise Invalid(f"{where}: not JSON: {str(exc)[:200]}") from None
        if not isinstance(raw, dict) or raw.get("schema") not in (SCHEMA, REFERENCE_SCHEMA):
            raise Invalid(f"{where}: schema is {str(raw.get('schema') if isinstance(raw, dict) else None)[:60]}, "
                          f"expected {SCHEMA!r} or {REFERENCE_SCHEMA!r}")
        return cls.from_dict(raw, where), raw


def merge_moments(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chan et al.'s merge of two ``RunningStats.to_dict`` (count, mean, M2, min, max per feature)."""
    if not a or not a["n"]:
        return b
    if not b or not b["n"]:
        return a
    na, nb = a["n"], b["n"]
    ma, mb = np.array(a["mean"], dtype=float), np.array(b["mean"], dtype=float)
    delta, total = mb - ma, na + nb
    return {"n": total, "mean": (ma + delta * nb / total).tolist(),
            "m2": (np.array(a["m2"], dtype=float) + np.array(b["m2"], dtype=float)
                   + delta**2 * na * nb / total).tolist(),
            "min": np.minimum(a["min"], b["min"]).tolist(), "max": np.maximum(a["max"], b["max"]).tolist()}


def _nums(values: np.ndarray) -> list[float | None]:
    """A vector for JSON: nan as null."""
    return [float(v) if np.isfinite(v) else None for v in values]


def _vector(raw: list[Any], features: int, where: str) -> np.ndarray:
    out = np.array([np.nan if v is None else v for v in raw], dtype=float)
    if out.shape != (features,):
        raise Invalid(f"{where} has {out.size} entries for {features} features")
    return out


def _pack(matrix: np.ndarray) -> str:
    """A symmetric matrix's upper triangle (diagonal included), little-endian float64, base64."""
    return base64.b64encode(matrix[np.triu_indices(len(matrix))].astype("<f8").tobytes()).decode()


def _unpack(text: str, features: int, where: str) -> np.ndarray:
    upper = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f8")
    at = np.triu_indices(features)
    if upper.size != len(at[0]):
        raise Invalid(f"{where} holds {upper.size} values, not the {len(at[0])} of {features} features' triangle")
    out = np.empty((features, features))
    out[at] = upper
    out.T[at] = upper
    return out
