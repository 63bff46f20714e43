"""Why Landfall's PCA finds little more than half of what a plain windowed PCA finds (issue #55, part 2).

``landfall bench pca-gap [--series NAMES] [--seed 0] [--json FILE] [--no-check]``
(or ``python -m landfall_bench.pca_gap``)

On each recording of the multivariate dev set (``landfall_bench.protocol.mv_root()``: the workspace's six, or the
MSL recording shipped in ``bench/data/multivariate-dev/``), on TSB-AD's protocol as ``landfall bench detect`` runs it
(the window one period of the first channel, the training prefix ``tr_N`` cut into stride-1 windows, the whole series
scored, each row the mean error of the windows over it as ``landfall score`` gives it, VUS-PR as TSB-AD computes it
with that window), the VUS-PR of:

- ``plain 95%`` and ``plain 32``: the user's plain windowed PCA, in scikit-learn: each channel z-scored on the
  training prefix's rows (``StandardScaler``: a constant channel's scale is 1), ``PCA(svd_solver="full")`` on every
  stride-1 window of the prefix, keeping the components that explain 95 % of the variance, or 32; a window's error the
  mean squared residual in the z-scored space;
- ``today``: Landfall's PCA as ``trainer.judging.baselines.Panel`` fits it in the verdict and the served detector scores
  it (``trainer.judging.detectors`` + ``landfall.core.scoring.Scorer``): the job's statistics (the manifest's, over the
  windows' values; a standard deviation <= 1e-12 replaced by 1), fitted on the training windows the ``segment`` hold-out
  of ``--seed`` leaves, every ``m``-th of them up to ``FIT_SAMPLE``, ``k`` = the model's code size (32), a window's
  error the MSE over its ``T x F`` values **in original units**. Reimplemented here in numpy (so each suspect can be
  changed alone) and checked against ``Panel`` itself on windows spread over the series (``panel check``: the largest
  relative difference of the errors);
- ``today`` with one suspect changed:
  (a) ``no hold-out``: fitted on every training window (the segment hold-out and its gap removed);
  (b) ``k 95%``: as many components as explain 95 % of the fit sample's variance (scikit-learn's rule);
  (c) ``constant out``: the channels constant in the training prefix (standard deviation <= 1e-12) left out of the
  error;
  (d) ``standardised``: the error in the standardised space (each channel in its training standard deviations);
  (e) ``no subsample``: every training window, not every ``m``-th up to ``FIT_SAMPLE`` (the same fit when the training
  share holds at most ``FIT_SAMPLE`` windows);
- (c') a constant channel's std taken as ``FLOOR``, the 10th percentile of the stds of the channels that vary, instead
  of 1 (in original units that changes nothing: the channel counts at its raw deviation whatever its std; so it is
  measured with (d));
- all five changed (``all``), and all but one (``all but (x)``), so the suspects that matter together show too;
- ``recommended``: (a), (b) with at most ``CAP`` components, (c') and (d) together (and (e)), the fix this
  measurement points to (docs/benchmarks.md, issue #55); also with the hold-out, without the cap, and at 32.

Deterministic (numpy and scikit-learn's full SVD, no random state). Prints the table (variants x series, with the mean
over the series) and the facts behind it per series; ``--json`` writes every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from landfall.arrival import period
from landfall_bench import protocol
from landfall_bench.realdata import sliding_windows

CODE_SIZE = 32  # the model's code size: SERIES_MODEL's units' last entry, the k today's PCA keeps
VARIANCE = 0.95  # the plain PCA's share of the variance
CONSTANT = 1e-12  # trainer.judging.baselines.Panel: a standard deviation at most this is replaced by 1
SHARES = ("today", "(d) standardised")  # the variants whose error is split by channel (the channel that dominates)
CHECK_WINDOWS = 256  # windows the reimplementation is compared with Panel on
FLOOR = "floor@0.1"  # (c'): a constant channel's std, the 10th percentile of the stds of the channels that vary
SUSPECTS = {  # (a)..(e): the field of the recipe each changes, and to what
    "a": ("holdout", False, "no hold-out"),
    "b": ("k", VARIANCE, "k 95%"),
    "c": ("constant", "out", "constant out"),
    "d": ("space", "standardised", "standardised"),
    "e": ("subsample", False, "no subsample"),
}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a Landfall-style PCA is fitted and scored; ``Recipe()`` is today's."""

    holdout: bool = True  # fitted on the segment hold-out's training windows (False: every training window)
    subsample: bool = True  # every m-th window, at most FIT_SAMPLE (False: all of them)
    k: int | float = CODE_SIZE  # components: a count, or a share of the variance (0 < k < 1)
    cap: int | None = None  # at most this many components (None: no cap)
    constant: str = "unit"  # channels constant in training: "unit" (std 1), "out" (not in the error), "floor@q"
    space: str = "original"  # the error's space: "original" (the served detector's) or "standardised"


CAP = 256  # the recommended recipe's most components: bounds the served detector's size and its cost per window
RECOMMENDED = Recipe(holdout=False, subsample=False, k=VARIANCE, cap=CAP, constant=FLOOR, space="standardised")


def variants() -> dict[str, Recipe]:
    """Today's recipe; each suspect changed alone; all five; all but each one; (c') and the recipe ``RECOMMENDED``
    (issue #55's fix: (a), (b), (c'), (d), (e) together), also without (a) and at 32 components."""
    today = Recipe()
    out = {"today": today}
    for key, (field, value, label) in SUSPECTS.items():
        out[f"({key}) {label}"] = dataclasses.replace(today, **{field: value})
    # (c') only matters in the standardised space: in original units a constant channel counts at its raw deviation
    # whatever std it is given (standardised by it, then scaled back by it).
    out["(d)+(c') standardised, constant floored"] = dataclasses.replace(today, space="standardised", constant=FLOOR)
    every = {field: value for field, value, _ in SUSPECTS.values()}
    out["all (a-e)"] = dataclasses.replace(today, **every)
    for key, (field, _, _) in SUSPECTS.items():
        out[f"all but ({key})"] = dataclasses.replace(today, **{**every, field: getattr(today, field)})
    out[f"recommended: (a)+(b)+(c')+(d)+(e), k <= {CAP}"] = RECOMMENDED
    out["recommended with the hold-out"] = dataclasses.replace(RECOMMENDED, holdout=True)
    out["recommended, k not capped"] = dataclasses.replace(RECOMMENDED, cap=None)
    out["recommended at k 32"] = dataclasses.replace(RECOMMENDED, k=CODE_SIZE, cap=None)
    return out


@dataclasses.dataclass
class Fit:
    """Principal components of one fit sample (standardised, flattened windows), by decreasing variance."""

    centre: np.ndarray  # [D]
    components: np.ndarray  # [r, D], r = the sample's rank at most
    variances: np.ndarray  # [r], decreasing
    total: float  # the sample's total variance (the sum over all D directions)
    fitted_on: int

    @classmethod
    def of(cls, z: np.ndarray) -> Fit:
        """As ``trainer.judging.baselines.pca`` fits (the covariance's eigenvectors); by SVD of the centred sample when
        it has fewer windows than dimensions (the same subspace, at a fraction of the cost)."""
        centre = z.mean(axis=0)
        centred = z - centre
        n = max(1, len(z) - 1)
        if len(z) >= z.shape[1]:
            values, vectors = np.linalg.eigh(centred.T @ centred / n)
            order = np.argsort(values)[::-1]
            variances, components = values[order], vectors[:, order].T
        else:
            _, s, vt = np.linalg.svd(centred, full_matrices=False)
            variances, components = s ** 2 / n, vt
        rank = max(1, min(len(z) - 1, z.shape[1]))
        return cls(centre, components[:rank], np.maximum(variances[:rank], 0.0), float(np.maximum(variances, 0).sum()),
                   len(z))

    def count(self, k: int | float, cap: int | None = None) -> int:
        """Components kept: ``k`` (at most the rank), or the fewest explaining a share ``k`` of the variance; at most
        ``cap``."""
        if isinstance(k, float) and 0.0 < k < 1.0:
            ratio = np.cumsum(self.variances) / max(self.total, 1e-300)
            n = int(min(len(self.variances), np.searchsorted(ratio, k, side="right") + 1))
        else:
            n = int(min(int(k), len(self.variances)))
        return min(n, cap) if cap else n


def weight(std: np.ndarray, constant: np.ndarray, space: str, handling: str) -> np.ndarray:
    """Each channel's weight on its squared standardised residual: ``std**2`` in original units (a constant channel's
    std is 1: its raw deviation), 1 in the standardised space; a constant channel's weight 0 (``out``) or, in the
    standardised space, ``1 / floor**2`` (``floor@q``: its std taken as the ``q`` quantile of the stds of the channels
    that vary, ``floor@0`` the smallest, ``floor@0.5`` the median)."""
    w = std ** 2 if space == "original" else np.ones_like(std)
    if handling == "out":
        w = np.where(constant, 0.0, w)
    elif handling.startswith("floor@") and space == "standardised" and (~constant).any():
        w = np.where(constant, 1.0 / np.quantile(std[~constant], float(handling[6:])) ** 2, w)
    return w


def standardiser(x_train: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The job's statistics (the manifest's: over the training windows' values), std <= ``CONSTANT`` replaced by 1 as
    ``Panel`` does, and the mask of the channels that are constant in training."""
    values = x_train.reshape(-1, x_train.shape[2]).astype(np.float64)
    mean, std = values.mean(0), values.std(0)
    constant = std <= CONSTANT
    return mean, np.where(constant, 1.0, std), constant


def fit_sample(x_train: np.ndarray, trained: np.ndarray, recipe: Recipe, mean: np.ndarray, std: np.ndarray
               ) -> np.ndarray:
    """The standardised, flattened windows the recipe fits on, picked as ``Panel.fit`` picks them."""
    from trainer.judging.baselines import FIT_SAMPLE

    windows = x_train[trained] if recipe.holdout else x_train
    if recipe.subsample:
        every = max(1, -(-len(windows) // FIT_SAMPLE))
        windows = windows[::every]
    return ((windows.astype(np.float64) - mean) / std).reshape(len(windows), -1)


def plain_fit(train_rows: np.ndarray, window: int):
    """The user's plain windowed PCA (scikit-learn): the scaler and the full PCA of every prefix window."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(train_rows.astype(np.float64))
    z = sliding_windows(scaler.transform(train_rows.astype(np.float64)), window, 1)
    pca = PCA(svd_solver="full").fit(z.reshape(len(z), -1))
    k95 = int(np.searchsorted(np.cumsum(pca.explained_variance_ratio_), VARIANCE, side="right") + 1)
    return scaler, pca, {"plain 95%": min(k95, len(pca.components_)), "plain 32": min(32, len(pca.components_))}


def measure(name: str, data: dict, seed: int = 0, check: bool = True) -> dict:
    """Every variant's VUS-PR on one series (the module doc)."""
    t0 = time.monotonic()
    values, labels, n_train = data["values"], data["labels"], data["train_rows"]
    w = period.length(values[:, 0])
    x_train = sliding_windows(values[:n_train], w, 1).astype("<f4")
    trained = protocol.trained_mask(seed, len(x_train), w)
    mean, std, constant = standardiser(x_train)
    t, f = w, values.shape[1]
    recipes = variants()
    fits: dict[tuple[bool, bool], Fit] = {}
    for r in recipes.values():
        key = (r.holdout, r.subsample)
        if key not in fits:
            fits[key] = Fit.of(fit_sample(x_train, trained, r, mean, std))
    scaler, plain, plain_k = plain_fit(values[:n_train], w)
    weights = {(r.space, r.constant): np.tile(weight(std, constant, r.space, r.constant), t)
               for r in recipes.values()}  # per flattened [T x F] value

    shares = {label: np.zeros(f) for label in SHARES}  # each channel's part of the error summed over the series
    share_keys = {label: (recipes[label].holdout, recipes[label].subsample,
                          fits[(recipes[label].holdout, recipes[label].subsample)].count(recipes[label].k,
                                                                                         recipes[label].cap))
                  for label in SHARES}

    def errors(x: np.ndarray) -> dict[str, np.ndarray]:
        x64 = np.asarray(x, np.float64)
        z = ((x64 - mean) / std).reshape(len(x), -1)
        out: dict[str, np.ndarray] = {}
        by_fit: dict[tuple, dict[str, np.ndarray]] = {}
        for label, r in recipes.items():
            fit = fits[(r.holdout, r.subsample)]
            k = fit.count(r.k, r.cap)
            key = (r.holdout, r.subsample, k)
            if key not in by_fit:
                c = fit.components[:k]
                residual2 = (z - ((z - fit.centre) @ c.T @ c + fit.centre)) ** 2
                by_fit[key] = {how: residual2 @ wt / max(1, np.count_nonzero(wt)) for how, wt in weights.items()}
                per_channel = residual2.reshape(len(x), t, f).sum(axis=(0, 1))
                for share, at in share_keys.items():
                    if at == key:
                        shares[share] += per_channel * weights[(recipes[share].space, recipes[share].constant)][:f]
            out[label] = by_fit[key][(r.space, r.constant)]
        zp = scaler.transform(x64.reshape(-1, f)).reshape(len(x), -1)
        c = plain.components_[:max(plain_k.values())]
        code = (zp - plain.mean_) @ c.T
        for label, k in plain_k.items():
            out[label] = ((zp - (code[:, :k] @ c[:k] + plain.mean_)) ** 2).mean(axis=1)
        return out

    rows = protocol.located_many(errors, values, w)
    top = {label: (int(np.argmax(v)), float(v.max() / max(v.sum(), 1e-300))) for label, v in shares.items()}
    order = ["plain 95%", "plain 32", *recipes]
    vus = {label: protocol.ranking(labels, rows[label], w)["vus_pr"] for label in order}
    out = {
        "series": name, "rows": len(values), "channels": f, "window": w, "train_rows": n_train,
        "training_windows": len(x_train), "trained_windows": int(trained.sum()), "seed": seed,
        "constant_channels": int(constant.sum()),
        "constant_channels_varying_later": int((constant & (values[n_train:].std(0) > CONSTANT)).sum()),
        "smallest_std": float(std[~constant].min()) if (~constant).any() else None,
        "largest_std": float(std[~constant].max()) if (~constant).any() else None, "components": {
            **plain_k, **{label: fits[(r.holdout, r.subsample)].count(r.k, r.cap) for label, r in recipes.items()}},
        "fitted_on": {label: fits[(r.holdout, r.subsample)].fitted_on for label, r in recipes.items()},
        "variance_kept_at_32": {f"{'hold-out' if h else 'all'}": float(
            fits[(h, s)].variances[:CODE_SIZE].sum() / fits[(h, s)].total) for (h, s) in fits if s},
        "largest_channel_share": top,
        "vus_pr": vus, "published_pca": (data.get("published") or {}).get("PCA"),
    }
    if check:
        out["panel_check"] = panel_check(values, x_train, trained, mean, std, w, errors)
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


def panel_check(values: np.ndarray, x_train: np.ndarray, trained: np.ndarray, mean: np.ndarray, std: np.ndarray,
                w: int, errors) -> float:
    """The largest relative difference between ``today`` here and ``trainer.judging.baselines.Panel``'s PCA errors
    (fitted as ``landfall bench detect`` fits it, measured in original units as the served detector did before issue #55
    changed the error's space: ``today`` is that recipe) on ``CHECK_WINDOWS`` windows spread over the whole series."""
    from trainer.judging import baselines

    panel = baselines.Panel.fit([x_train[trained]], int(trained.sum()), mean, std, (w, values.shape[1]), CODE_SIZE,
                                scale=np.ones(values.shape[1]))
    starts = np.unique(np.linspace(0, len(values) - w, CHECK_WINDOWS).astype(np.int64))
    x = values[starts[:, None] + np.arange(w)[None, :]]
    theirs = panel.errors(x)[baselines.PCA]
    ours = errors(x)["today"]
    return float(np.max(np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-300)))


def table(results: list[dict]) -> str:
    labels = list(results[0]["vus_pr"])
    head = ["variant", *(r["series"].split("_Sensor")[0].split("_Facility")[0].split("_Human")[0] for r in results)]
    if len(results) > 1:
        head.append(f"mean of {len(results)}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in labels:
        cells = [f"{r['vus_pr'][label]:.3f}" + (f" (k {r['components'][label]})" if r["components"][label] != CODE_SIZE
                                                else "") for r in results]
        if len(results) > 1:
            cells.append(f"{np.mean([r['vus_pr'][label] for r in results]):.3f}")
        lines.append("| " + " | ".join([label, *cells]) + " |")
    pub = [r["published_pca"] for r in results]
    if all(p is not None for p in pub):
        lines.append("| " + " | ".join(["TSB-AD-M's PCA (published)", *(f"{p:.3f}" for p in pub),
                                        *([f"{np.mean(pub):.3f}"] if len(results) > 1 else [])]) + " |")
    facts = ["", "| series | rows x channels | window | training windows / after the hold-out | constant channels "
             "(varying later) | std range | components: today / 95% (hold-out, all) / plain 95% | variance at 32 "
             "(hold-out) | largest channel's share of the error: today / standardised | panel check | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c = r["components"]
        facts.append(
            f"| {r['series']} | {r['rows']} x {r['channels']} | {r['window']} | {r['training_windows']} / "
            f"{r['trained_windows']} | {r['constant_channels']} ({r['constant_channels_varying_later']}) | "
            f"{r['smallest_std']:.2g}-{r['largest_std']:.3g} | {c['today']} / {c['(b) k 95%']}, "
            f"{c['all (a-e)']} / {c['plain 95%']} | {r['variance_kept_at_32'].get('hold-out', float('nan')):.3f} | "
            + " / ".join(f"ch {ch}: {share:.0%}" for ch, share in (r["largest_channel_share"][s] for s in SHARES))
            + " | " + (f"{r['panel_check']:.1e}" if "panel_check" in r else "-") + f" | {r['seconds']} |")
    return "\n".join(lines + facts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="landfall bench pca-gap", description=__doc__.split("\n", 1)[0])
    p.add_argument("--series", default="", help="names or their number (063,066,...; default: every recording)")
    p.add_argument("--seed", type=int, default=0, help="the segment hold-out's seed (landfall bench detect's first)")
    p.add_argument("--no-check", action="store_true", help="skip the check against trainer.judging.baselines.Panel")
    p.add_argument("--json", default="", help="write every figure here")
    args = p.parse_args(argv)
    names = sorted(protocol.mv_docs())
    if args.series:
        wanted = set(args.series.split(","))
        names = [n for n in names if n in wanted or n.split("_")[0] in wanted]
    print(f"recordings in {protocol.mv_root()}: {', '.join(names)}", flush=True)
    results = []
    for name in names:
        results.append(measure(name, protocol.mv_series(name), args.seed, not args.no_check))
        r = results[-1]
        print(f"  {name}: today {r['vus_pr']['today']:.3f}, plain 95% {r['vus_pr']['plain 95%']:.3f} "
              f"({r['seconds']} s)", flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=2)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
