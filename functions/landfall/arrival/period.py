"""A series' period, estimated the way TSB-AD estimates a detector's sliding window (its ``find_length_rank``, rank 1).

TSB-AD (Liu and Paparrizos, NeurIPS 2024 Datasets and Benchmarks, github.com/TheDatumOrg/TSB-AD) sets every
sub-sequence detector's window, and VUS-PR's sliding window, to one period of the series, read off its
autocorrelation. The rule, as its paper and code describe it (written here from that description, numpy only):

1. the first ``MAX_ROWS`` values of the (univariate) series;
2. their autocorrelation at lags 0..``MAX_LAG`` (demeaned, normalised by the lag-0 sum, computed by FFT);
3. lags below ``SKIP`` are dropped; among the strict local maxima of what is left, the highest one;
4. its lag, unless that lag (counted from ``SKIP``) is below 3 or above 300, or there is no local maximum at all: then
   ``FALLBACK`` (125).

Used by ``shape.window.length: auto`` (a series dataset's window, estimated from its first arrival) and by
``landfall bench detect`` (TSB-AD's protocol). A multichannel series is estimated on its first channel.
"""

from __future__ import annotations

import numpy as np

MAX_ROWS = 20_000
MAX_LAG = 400
SKIP = 3
FALLBACK = 125
LOW, HIGH = 3, 300


def autocorrelation(x: np.ndarray, max_lag: int) -> np.ndarray:
    """``acf[k] = sum_t (x_t - m)(x_{t+k} - m) / sum_t (x_t - m)^2`` for ``k = 0..max_lag`` (zeros if constant)."""
    x = np.asarray(x, np.float64)
    x = x - x.mean()
    n = len(x)
    size = 1 << int(np.ceil(np.log2(max(2, 2 * n - 1))))
    spectrum = np.fft.rfft(x, size)
    full = np.fft.irfft(spectrum * np.conj(spectrum), size)[: max_lag + 1]
    return full / full[0] if full[0] > 0 else np.zeros(max_lag + 1)


def length(series: np.ndarray) -> int:
    """One period of ``series`` (rows), TSB-AD's way (the module doc)."""
    x = np.asarray(series, np.float64)
    if x.ndim > 1:
        x = x.reshape(len(x), -1)[:, 0]
    x = x[:MAX_ROWS]
    x = x[np.isfinite(x)]
    if len(x) < 2 * SKIP + 2:
        return FALLBACK
    acf = autocorrelation(x, min(MAX_LAG, len(x) - 1))[SKIP:]
    inner = np.flatnonzero((acf[1:-1] > acf[:-2]) & (acf[1:-1] > acf[2:])) + 1
    if not len(inner):
        return FALLBACK
    best = int(inner[np.argmax(acf[inner])])
    if best < LOW or best > HIGH:
        return FALLBACK
    return best + SKIP
