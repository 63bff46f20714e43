"""VUS-PR (``landfall.core.vus``) against the reference: aeon 1.6.0's ``range_pr_vus_score`` (the VLDB 2022 definition
as TheDatumOrg/VUS computes it), run in ``.venv-ref`` (``make ref``; its own venv, since aeon pins numpy below ours).

Cases: random label layouts, scores with ties, buffers from 0 to 80, and the real label layouts of the three labelled
series ``landfall bench detect`` uses (``landfall_bench.realdata.labelled_series``: UCR InternalBleeding16, GutenTAG
ecg-diff-count-3, BasicMotions with Running put in; all from the aeon 1.6.0 wheel)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from landfall.core import vus
from landfall_bench.realdata import LABELLED, labelled_series

REPO = Path(__file__).resolve().parents[3]
REF = REPO / ".venv-ref" / "bin" / "python"
SCRIPT = """
import json, sys
import numpy as np
from aeon.benchmarking.metrics.anomaly_detection import range_pr_vus_score
d = np.load(sys.argv[1])
print(json.dumps([range_pr_vus_score(d[f"y{k}"], d[f"s{k}"], max_buffer_size=int(d[f"b{k}"]))
                  for k in range(int(d["n"]))]))
"""


def _reference(cases: list[tuple[np.ndarray, np.ndarray, int]], tmp_path: Path) -> list[float]:
    if not REF.exists():
        pytest.fail(f"{REF} is missing: run `make ref` (aeon 1.6.0, the reference VUS-PR)")
    arrays = {"n": len(cases)}
    for k, (y, s, b) in enumerate(cases):
        arrays.update({f"y{k}": y, f"s{k}": s, f"b{k}": b})
    np.savez(tmp_path / "cases.npz", **arrays)
    out = subprocess.run([str(REF), "-c", SCRIPT, str(tmp_path / "cases.npz")], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_vus_pr_is_aeons_on_random_and_real_label_layouts(tmp_path):
    rng = np.random.default_rng(7)
    cases = []
    for k in range(10):
        n = int(rng.integers(40, 2500))
        y = np.zeros(n, np.int64)
        for _ in range(int(rng.integers(1, 5))):
            at = int(rng.integers(0, n - 1))
            y[at:at + int(rng.integers(1, 90))] = 1
        s = rng.normal(size=n) + y * rng.uniform(0, 3)
        cases.append((y, np.round(s, 1) if k % 3 == 0 else s, int(rng.integers(0, 80))))
    for name in LABELLED:  # the real label layouts, scored by a noisy detector that peaks on the anomalies
        _, _, labels = labelled_series(name)
        y = labels.astype(np.int64)
        s = np.convolve(y, np.ones(9) / 9, mode="same") + rng.normal(scale=0.3, size=len(y))
        cases.append((y, s, 64))
    got = [vus.vus_pr(y, s, b) for y, s, b in cases]
    np.testing.assert_allclose(got, _reference(cases, tmp_path), rtol=1e-12, atol=1e-12)


def test_a_perfect_ranking_beats_a_random_one_and_bad_input_is_named():
    y = np.zeros(500, np.int64)
    y[200:230] = 1
    perfect = vus.vus_pr(y, y + 0.0, 32)
    noise = vus.vus_pr(y, np.random.default_rng(0).normal(size=500), 32)
    assert perfect > 0.8 > 0.2 > noise
    assert vus.vus_pr(y, np.ones(500), 32) == 0.0  # a constant score, as aeon says
    with pytest.raises(ValueError, match="at least one positive"):
        vus.vus_pr(np.zeros(10), np.arange(10.0), 4)
    with pytest.raises(ValueError, match="9 labels for 10 scores"):
        vus.vus_pr(np.ones(9), np.arange(10.0), 4)
