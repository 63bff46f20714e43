"""The detectors a data scientist tries first, on the verdict's held-out windows and with its metric.

A recurrent autoencoder is worth its GPU-seconds only if it reconstructs held-out windows better than what costs
nothing to fit. Beside the training set's mean window (``trainer.floor``), every job that can be judged fits:

- ``pca``: principal components of the flattened ``T x F`` windows (each feature standardised with the job's
  statistics, as the model sees them), keeping ``k`` = the model's code size (``--units``' last entry): a linear
  autoencoder with the GRU's bottleneck, so the GRU has to earn its non-linearity. A window is reconstructed as
  its projection on the ``k`` components. TSB-AD (Liu and Paparrizos, NeurIPS 2024 Datasets and Benchmarks,
  "The Elephant in the Room: Towards A Reliable Time-Series Anomaly Detection Benchmark") finds sub-sequence PCA
  among the strongest detectors on its 1,070 series.
- ``nearest_neighbour``: a held-out window is reconstructed as its nearest training window (Euclidean, on the
  standardised values) among a bounded sample of ``NN_SAMPLE`` training windows. TSB-AD's other strong simple
  detector is a nearest-neighbour distance; here it is scored as a reconstruction, so its loss is comparable.

Every detector's loss is the verdict's metric (``trainer.scoring``: per-window MSE over the ``T x F`` values in
original units, averaged over the chief's held-out windows), and the model's skill over each is ``1 - loss /
baseline_loss``. The gate (``--min-skill-over``, spec ``verdict.min_skill_over``) says which of them promotion must
beat and by how much; the mean window keeps its own gate (``--min-skill``).

Bounded cost (a small fraction of an epoch, whatever the dataset's size): the detectors are fitted on a systematic
sample of the chief's training share (every ``m``-th window, at most ``FIT_SAMPLE``; the nearest neighbour's sample
is every ``m'``-th of those, at most ``NN_SAMPLE``), read in the same pass the mean window already makes. PCA is a
``D x D`` covariance (``D = T x F``) and one eigendecomposition; the nearest neighbour one matrix product of the
held-out block against the sample. All in float64 numpy: no TensorFlow, so a restarted chief computes the same.

The same detectors score a labelled set (``scores``), so its average precision and VUS-PR sit beside the model's
(``trainer.labelled``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from trainer import floor

MEAN_WINDOW, PCA, NEAREST = floor.NAME, "pca", "nearest_neighbour"
NAMES = (MEAN_WINDOW, PCA, NEAREST)
DESCRIPTIONS = {
    MEAN_WINDOW: floor.DESCRIPTION,
    PCA: "principal components of the standardised windows, as many as the model's code size (a linear autoencoder)",
    NEAREST: "each window reconstructed as its nearest training window (Euclidean, standardised), from a sample",
}
FIT_SAMPLE = 16_384  # training windows PCA is fitted on, at most
NN_SAMPLE = 4_096  # training windows the nearest neighbour looks in, at most
QUERY_BLOCK = 1_024  # held-out windows compared with the sample at once (memory: QUERY_BLOCK x NN_SAMPLE floats)


def _flat(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float64).reshape(len(x), -1)


@dataclasses.dataclass
class Panel:
    """The baselines fitted on one training sample; ``errors`` gives each one's per-window losses."""

    mean: np.ndarray  # per feature (the job's statistics): standardisation
    std: np.ndarray
    shape: tuple[int, int]
    code_size: int
    mean_window: floor.MeanWindow
    components: np.ndarray | None = None  # [k, D] orthonormal rows, standardised space
    centre: np.ndarray | None = None  # [D] the sample's mean, standardised
    neighbours: np.ndarray | None = None  # [m, D] standardised
    fitted_on: int = 0

    @classmethod
    def fit(cls, blocks: Iterable[np.ndarray], total: int, mean: Sequence[float] | None, std: Sequence[float] | None,
            shape: tuple[int, int], code_size: int) -> Panel:
        """Fits on ``blocks`` (float32 ``[n, T, F]`` in original units, ``total`` windows in all, in a deterministic
        order): the mean window on all of them, PCA and the nearest neighbour on every ``m``-th."""
        t, f = int(shape[0]), int(shape[1])
        mu = np.asarray(mean if mean is not None else np.zeros(f), np.float64)
        sd = np.asarray(std if std is not None else np.ones(f), np.float64)
        sd = np.where(sd > 1e-12, sd, 1.0)
        panel = cls(mu, sd, (t, f), max(1, int(code_size)), floor.MeanWindow())
        every = max(1, -(-int(total) // FIT_SAMPLE))
        kept: list[np.ndarray] = []
        seen = 0
        for block in blocks:
            if not len(block):
                continue
            panel.mean_window.add(block)
            index = seen + np.arange(len(block))
            take = block[index % every == 0]
            if len(take):
                kept.append(panel.standardise(take))
            seen += len(block)
        if kept:
            panel._fit_sample(np.concatenate(kept))
        return panel

    def standardise(self, x: np.ndarray) -> np.ndarray:
        return _flat((np.asarray(x, np.float64) - self.mean) / self.std)

    def _original(self, z: np.ndarray) -> np.ndarray:
        t, f = self.shape
        return z.reshape(len(z), t, f) * self.std + self.mean

    def _fit_sample(self, z: np.ndarray) -> None:
        self.fitted_on = len(z)
        self.centre = z.mean(axis=0)
        centred = z - self.centre
        k = min(self.code_size, z.shape[1], max(1, len(z) - 1))
        # The covariance's leading eigenvectors (D x D, symmetric): D = T x F is a few hundred to a few thousand.
        cov = centred.T @ centred / max(1, len(z) - 1)
        values, vectors = np.linalg.eigh(cov)
        self.components = vectors[:, np.argsort(values)[::-1][:k]].T
        every = max(1, -(-len(z) // NN_SAMPLE))
        self.neighbours = z[::every]

    def errors(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Each baseline's per-window MSE over the ``T x F`` values in original units, float64 ``[n]``."""
        x = np.asarray(x, np.float64)
        out = {MEAN_WINDOW: self.mean_window.errors(x)}
        if self.components is None or self.neighbours is None or self.centre is None:
            return out
        z = self.standardise(x)
        projected = (z - self.centre) @ self.components.T @ self.components + self.centre
        out[PCA] = ((x - self._original(projected)) ** 2).mean(axis=(1, 2))
        near = np.empty(len(z), np.int64)
        norms = (self.neighbours ** 2).sum(axis=1)
        for lo in range(0, len(z), QUERY_BLOCK):
            q = z[lo:lo + QUERY_BLOCK]
            d = norms[None, :] - 2.0 * q @ self.neighbours.T  # + |q|^2, the same for every candidate
            near[lo:lo + len(q)] = np.argmin(d, axis=1)
        out[NEAREST] = ((x - self._original(self.neighbours[near])) ** 2).mean(axis=(1, 2))
        return out

    def describe(self) -> dict[str, dict]:
        return {
            MEAN_WINDOW: {"description": DESCRIPTIONS[MEAN_WINDOW], "training_instances": self.mean_window.count},
            PCA: {"description": DESCRIPTIONS[PCA], "components": (len(self.components)
                                                                    if self.components is not None else None),
                  "training_instances": self.fitted_on},
            NEAREST: {"description": DESCRIPTIONS[NEAREST], "training_instances": (
                len(self.neighbours) if self.neighbours is not None else None)},
        }


@dataclasses.dataclass
class Tally:
    """Per-window losses of each baseline over the held-out blocks, gathered as the challenger is scored."""

    panel: Panel
    parts: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)

    def add(self, block: np.ndarray) -> None:
        if not len(block):
            return
        for name, errs in self.panel.errors(block).items():
            self.parts.setdefault(name, []).append(errs)

    def losses(self) -> dict[str, float | None]:
        return {name: (float(np.concatenate(self.parts[name]).mean()) if self.parts.get(name) else None)
                for name in NAMES}


def report(panel: Panel, losses: dict[str, float | None], loss: float) -> dict[str, dict]:
    """``metrics.json``'s ``baselines``: each baseline's description, held-out loss and the model's skill over it."""
    out = panel.describe()
    for name in NAMES:
        value = losses.get(name)
        out[name].update(loss=value, skill=floor.skill(loss, value) if value is not None else None)
    return out


def beaten_by(baselines: dict[str, dict] | None) -> list[str]:
    """The baselines that reconstruct the held-out windows better than the model (its skill over them below 0)."""
    return [name for name, doc in (baselines or {}).items()
            if isinstance(doc, dict) and doc.get("skill") is not None and doc["skill"] < 0.0]


def parse_margins(text: str) -> dict[str, float]:
    """``--min-skill-over``: ``NAME=MARGIN[,NAME=MARGIN]`` (``none`` or empty: no gate), names among ``pca`` and
    ``nearest_neighbour``; raises ``ValueError`` naming the bad part."""
    out: dict[str, float] = {}
    text = (text or "").strip()
    if text.lower() in ("", "none"):
        return out
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in (PCA, NEAREST):
            raise ValueError(f"min skill over: {part.strip()!r} is not NAME=MARGIN with NAME {PCA} or {NEAREST}")
        margin = float(value)
        if margin > 1.0:
            raise ValueError(f"min skill over {name} must be <= 1, got {margin}")
        out[name] = margin
    return out
