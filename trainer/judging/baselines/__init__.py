"""The detectors a data scientist tries first, on the verdict's held-out windows and with its metric: a registry of
fixed detectors, one module each.

A recurrent autoencoder is worth its GPU-seconds only if it detects and reconstructs held-out windows better than
what costs nothing to fit. Beside the training set's mean window (``trainer.judging.floor``, the floor every job has),
every job that can be judged fits each registered detector (``KINDS``, in the tie order simplest first):

- ``pca`` (``trainer.judging.baselines.pca``): principal components at the model's code size, a linear autoencoder;
- ``nearest_neighbour`` (``trainer.judging.baselines.nearest_neighbour``): the nearest of a bounded sample of training
  windows;
- ``kmeans`` (``trainer.judging.baselines.kmeans``): KMeansAD, the nearest of 20 k-means centroids;
- ``pca_variance`` (``trainer.judging.baselines.pca_variance``): principal components to 95 % of the variance, at most
  256: the one detector best on average over both dev sets (univariate and multivariate) now that every feature counts
  in its own spread (issue #55, ``landfall bench detect --set dev,multivariate --baselines-only``, docs/benchmarks.md);

- ``pca_rows`` (``trainer.judging.baselines.pca_rows``): TSB-AD-M's PCA, single standardised rows scored by pyod's
  distances to the components; a row detector, located by rows;
- ``kmeans_znorm`` (``trainer.judging.baselines.kmeans_znorm``): TSB-AD-M's KMeansAD, each window z-normalised over its
  values, its distance to the nearest of 10 centroids; a row the mean of the windows over it.

Those two are TSB-AD-M's best classical detectors over its 180 evaluation series (published mean VUS-PR: PCA 0.310,
KMeansAD 0.295; then CBLOF 0.273, MCD 0.271, OCSVM 0.265, IForest 0.203, HBOS 0.190, KNN 0.184), and with them the
label-free choice's mean over the multivariate dev set rises from 0.583 to 0.665 (issue #66, docs/benchmarks.md).

Opt-in, not default candidates (``OPT_IN``; ``LANDFALL_DETECTORS=trainer.judging.baselines.ocsvm,...``), each one module
that fits, serves and is tested as the default ones: ``mcd`` (the robust covariance of the principal components' codes:
registering it lowers the choice over both dev sets from 0.479 to 0.461, docs/benchmarks.md, "A robust covariance"),
and TSB-AD-M's other single-row detectors, ``ocsvm``, ``hbos``, ``knn``, ``cblof``, ``mcd_rows``, ``iforest``: each
reproduces its published row (``landfall bench published``), and ``ocsvm`` is the labelled best on the server machine
066, but the surrogate set ranks them above the windowed detectors where they lose (MSL: hbos chosen, 0.124 against
0.997), and registering them all lowers the choice's multivariate mean to 0.505 (docs/benchmarks.md).

**To add a detector**, write one module beside these with a class ``Detector`` (scikit-learn's shape: ``fit``, then
use) that has ``name`` and ``description``, and

- ``fit(z, space) -> self``: on the standardised, flattened training windows ``z`` (float64 ``[n, T x F]``: each
  feature standardised with the job's statistics, as the model sees them); ``space``
  (``trainer.judging.baselines.space``) has the window shape, the model's code size and the statistics, so
  ``space.original_rows(z)`` gives the rows in original units;
- either **it reconstructs**: ``reconstruct(z) -> [n, T x F]``, each window's reconstruction in the same space
  (float64 numpy), its error the verdict's metric; ``serving(module) -> fn`` the same reconstruction as a TensorFlow
  function of a float32 ``[n, T x F]`` tensor;
- or **it scores**: ``row_scores(z) -> [n, T]``, each window row's score (float64, at least 0, higher more anomalous:
  a row scorer gives a row the same score in every window, a window scorer gives every row of a window the window's);
  ``serving(module) -> fn`` the same scores as a TensorFlow function (float32 ``[n, T x F]`` to ``[n, T]``);
  ``trainer.judging.baselines.rowwise.RowDetector`` is the base of the detectors that score single rows;
- ``unit`` (optional): how its rows are scored from the windows over them when it is served
  (``landfall.core.rules.series_windows``: ``row`` a row's own score, ``mean`` the mean of the windows' scores);
  without one, the dataset's (``shape.window.combine``). Each candidate is a detector and its unit;
- ``serving(module)`` puts its constants on ``module`` as variables (``trainer.judging.detectors`` saves it as a
  SavedModel the scorer serves, never a pickle);
- ``describe() -> dict``: what it was fitted on, for ``metrics.json``;
- ``applies(space) -> bool`` (optional, a class method): whether it is fitted at all in a job of that shape (the row
  detectors that z-score each row across its channels need three channels or more).

then register it: one line in ``KINDS`` below (or ``register(module.Detector)``; ``LANDFALL_DETECTORS`` names
extra modules to import and register, ``module[,module]``, as a plug-in that ships outside the package). Nothing in the
verdict, the selection, the export or the scorer changes: each candidate is fitted, scored on the surrogate and
labelled sets, chosen, saved and served through this interface.

Every detector's loss is the verdict's metric (``landfall.core.scoring``: per-window MSE over the ``T x F`` values, each
feature's residual in its ``error_scale``, averaged over the chief's held-out windows), and the model's skill over
each is ``1 - loss / baseline_loss``. The gate (``--min-skill-over``, spec ``verdict.min_skill_over``) says which
of ``pca`` and
``nearest_neighbour`` promotion must beat and by how much; the mean window keeps its own gate (``--min-skill``).

Bounded cost (a small fraction of an epoch, whatever the dataset's size): the detectors are fitted on a systematic
sample of the chief's training share (every ``m``-th window, at most ``FIT_SAMPLE``), read in the same pass the mean
window already makes; each bounds its own work beyond that (the nearest neighbour's sample). All in float64 numpy or
scikit-learn with fixed seeds: no TensorFlow, so a restarted chief computes the same.

The same detectors score a labelled set (``scores``), so its average precision and VUS-PR sit beside the model's
(``trainer.judging.labelled_check``).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from landfall.core.rules import moments, series_windows
from landfall.core.rules.series_windows import COMBINE
from landfall.core.scoring import Histogram
from trainer.judging import floor
from trainer.judging.baselines import kmeans, kmeans_znorm, nearest_neighbour, pca, pca_rows, pca_variance
from trainer.judging.baselines.space import Space


class Detector(Protocol):
    """What a detector module's ``Detector`` class provides (the module docstring)."""

    name: str
    description: str

    def fit(self, z: np.ndarray, space: Space) -> Detector: ...

    def serving(self, module: Any) -> Any: ...

    def describe(self) -> dict[str, Any]: ...


MEAN_WINDOW, PCA, NEAREST = floor.NAME, pca.NAME, nearest_neighbour.NAME
KINDS: dict[str, type[Detector]] = {}  # name -> class, in the tie order: simplest first
NAMES: list[str] = [MEAN_WINDOW]  # the mean window, then every registered detector (one list, grown by register)
DESCRIPTIONS: dict[str, str] = {MEAN_WINDOW: floor.DESCRIPTION}
FIT_SAMPLE = 16_384  # training windows the detectors are fitted on, at most


def register(kind: type[Detector]) -> type[Detector]:
    """Adds a detector class to the registry (idempotent); returns it, so it can decorate the class."""
    if kind.name in (MEAN_WINDOW, "model"):
        raise ValueError(f"a detector cannot be named {kind.name!r}")
    if kind.name not in KINDS:
        NAMES.append(kind.name)
    KINDS[kind.name] = kind
    DESCRIPTIONS[kind.name] = kind.description
    return kind


for _kind in (pca.Detector, nearest_neighbour.Detector, kmeans.Detector, pca_variance.Detector, pca_rows.Detector,
              kmeans_znorm.Detector):
    register(_kind)
# Detectors that ship but are no default candidate (``LANDFALL_DETECTORS`` registers them; the module docstring says
# why): each one module, fitted, served and tested as the default ones are.
OPT_IN = ("trainer.judging.baselines.mcd", "trainer.judging.baselines.ocsvm", "trainer.judging.baselines.hbos",
          "trainer.judging.baselines.knn", "trainer.judging.baselines.cblof", "trainer.judging.baselines.mcd_rows",
          "trainer.judging.baselines.iforest")
for _module in filter(None, (m.strip() for m in os.environ.get("LANDFALL_DETECTORS", "").split(","))):
    register(importlib.import_module(_module).Detector)


def scores(detector: Any) -> bool:
    """Whether a fitted detector scores (``row_scores``) rather than reconstructs."""
    return callable(getattr(detector, "row_scores", None))


def applies(kind: Any, space: Space) -> bool:
    """Whether a detector is fitted in ``space`` at all (its optional ``applies(space)``; default yes): one that has
    nothing to see there (a row z-scored across fewer than three channels) is no candidate of that job."""
    check = getattr(kind, "applies", None)
    return bool(check(space)) if callable(check) else True


def unit_of(kind: Any) -> str | None:
    """A detector's declared unit (``unit``: how its rows are scored when served), None: the dataset's."""
    unit = getattr(kind, "unit", None)
    return unit if unit in COMBINE else None


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
    scale: np.ndarray | None = None  # each feature's error unit (landfall.core.scoring; None: original units)
    kinds: dict[str, Detector] = dataclasses.field(default_factory=dict)  # the fitted detectors, by name
    fitted_on: int = 0

    @classmethod
    def fit(cls, blocks: Iterable[np.ndarray], total: int, mean: Sequence[float] | None, std: Sequence[float] | None,
            shape: tuple[int, int], code_size: int, scale: Sequence[float] | None = None) -> Panel:
        """Fits on ``blocks`` (float32 ``[n, T, F]`` in original units, ``total`` windows in all, in a deterministic
        order): the mean window on all of them, every registered detector on every ``m``-th. The errors are measured
        in ``scale`` (the job's ``error_scale``; by default the one ``std`` gives, or original units without
        ``std``)."""
        t, f = int(shape[0]), int(shape[1])
        mu = np.asarray(mean if mean is not None else np.zeros(f), np.float64)
        if scale is None and std is not None:
            scale = moments.error_scale(std)
        sd = moments.scaled(std if std is not None else np.ones(f))
        panel = cls(mu, sd, (t, f), max(1, int(code_size)), floor.MeanWindow(),
                    np.asarray(scale, np.float64) if scale is not None else None)
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

    @property
    def space(self) -> Space:
        """What the detectors are fitted in (``trainer.judging.baselines.space``)."""
        return Space(self.shape, self.code_size, self.mean, self.std, self.scale)

    def _fit_sample(self, z: np.ndarray) -> None:
        self.fitted_on = len(z)
        space = self.space
        self.kinds = {name: kind().fit(z, space) for name, kind in KINDS.items() if applies(kind, space)}

    def errors(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Each baseline's per-window MSE over the ``T x F`` values (the verdict's metric, in ``scale``), float64
        ``[n]``: the mean of its rows' (``row_errors``)."""
        return {name: rows.mean(axis=1) for name, rows in self.row_errors(x).items()}

    def row_errors(self, x: np.ndarray, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Each baseline's error of every window row, float64 ``[n, T]``: a reconstruction's in ``scale``
        (``moments.scaled_row_mse``), a scoring detector's own ``row_scores``. ``names``: only these (default all)."""
        x = np.asarray(x, np.float64)
        wanted = set(NAMES if names is None else names)
        out = {MEAN_WINDOW: self.mean_window.row_errors(x, self.scale)} if MEAN_WINDOW in wanted else {}
        fitted_ones = {n: f for n, f in self.kinds.items() if n in wanted}
        if not fitted_ones:
            return out
        z = self.standardise(x)
        for name, fitted in fitted_ones.items():
            out[name] = (np.asarray(fitted.row_scores(z), np.float64) if scores(fitted)
                         else moments.scaled_row_mse(x - self._original(fitted.reconstruct(z)), self.scale))
        return out

    def window_scores(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Each candidate's score of each window as the surrogate set judges it, in its unit
        (``landfall.core.rules.series_windows.window_scores``)."""
        return {name: series_windows.window_scores(rows, self.unit(name)) for name, rows in self.row_errors(x).items()}

    def unit(self, name: str) -> str | None:
        """Candidate ``name``'s declared unit (``unit_of``), None for the mean window and a detector without one."""
        return unit_of(KINDS.get(name))

    def describe(self) -> dict[str, dict]:
        out = {MEAN_WINDOW: {"description": DESCRIPTIONS[MEAN_WINDOW], "training_instances": self.mean_window.count}}
        for name in KINDS:
            fitted = self.kinds.get(name)
            out[name] = {"description": DESCRIPTIONS[name], **(fitted.describe() if fitted is not None else {})}
            if (unit := unit_of(KINDS[name])) is not None:
                out[name]["unit"] = unit
        return out


@dataclasses.dataclass
class Tally:
    """Per-window losses of each baseline over the held-out blocks, gathered as the challenger is scored."""

    panel: Panel
    parts: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)
    rows: dict[str, Histogram] = dataclasses.field(default_factory=dict)  # each one's row errors: its row threshold

    def add(self, block: np.ndarray) -> None:
        if not len(block):
            return
        for name, own in self.panel.row_errors(block).items():
            self.parts.setdefault(name, []).append(own.mean(axis=1))
            self.rows.setdefault(name, Histogram()).add(own.ravel())

    def losses(self) -> dict[str, float | None]:
        return {name: (float(np.concatenate(self.parts[name]).mean()) if self.parts.get(name) else None)
                for name in NAMES}


def report(panel: Panel, losses: dict[str, float | None], loss: float) -> dict[str, dict]:
    """``metrics.json``'s ``baselines``: each baseline's description, held-out loss and the model's skill over it (a
    scoring detector's mean held-out score instead: its scores are no reconstruction loss to compare)."""
    out = panel.describe()
    for name in NAMES:
        value = losses.get(name)
        if scores(panel.kinds.get(name)):  # its held-out figure is a score, not a reconstruction loss: no skill
            out[name].update(loss=None, skill=None, mean_score=value)
            continue
        out[name].update(loss=value, skill=floor.skill(loss, value) if value is not None else None)
    return out


def beaten_by(baselines: dict[str, dict] | None) -> list[str]:
    """The baselines that reconstruct the held-out windows better than the model (its skill over them below 0)."""
    return [name for name, doc in (baselines or {}).items()
            if isinstance(doc, dict) and doc.get("skill") is not None and doc["skill"] < 0.0]
