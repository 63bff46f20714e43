"""Pictures people would rather look at than read: loss curves, epoch times, scaling, scores. Every plot names its
axes and, when it draws more than one series, has a legend naming each (tests/landfall/local/test_plots_named.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def training_curves(metrics: list[dict[str, Any]], path: Path, scored: Any = None) -> Path:
    """Train and validation loss per epoch, and each epoch's wall time, for every job; with ``scored``
    (``landfall.local.anomalies.score_injected``'s result) a third panel: its error histogram and threshold."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3 if scored else 2, figsize=(18 if scored else 12, 4.5))
    ax_loss, ax_time = axes[0], axes[1]
    if scored:
        _error_histogram(axes[2], scored if isinstance(scored, dict) else scored.as_dict())
    for m in metrics:
        epochs = m.get("epochs") or []
        xs = [e["epoch"] for e in epochs]
        label = f"{m.get('job', '?')} ({m.get('num_workers', '?')} workers)"
        line = ax_loss.plot(xs, [e.get("loss") for e in epochs], marker="o", label=f"{label} train")[0]
        ax_loss.plot(xs, [e.get("val_loss") for e in epochs], marker="x", linestyle="--", color=line.get_color(),
                     label=f"{label} validation")
        ax_time.plot(xs, [e.get("wall_s") for e in epochs], marker="o", color=line.get_color(), label=label)
    ax_loss.set(title="Reconstruction loss (MSE)", xlabel="epoch", ylabel="loss")
    ax_time.set(title="Epoch time", xlabel="epoch", ylabel="seconds")
    ax_time.set_ylim(bottom=0)
    from matplotlib.ticker import MaxNLocator

    for ax in (ax_loss, ax_time):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(plt, fig, path)


def scaling(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Epoch time and examples/s against the number of workers, as the seed article draws it."""
    plt = _pyplot()
    workers = [r["workers"] for r in rows]
    fig, (ax_time, ax_rate) = plt.subplots(1, 2, figsize=(12, 4.5))
    ax_time.plot(workers, [r["epoch_s"] for r in rows], marker="o")
    ax_time.set(title="Epoch time", xlabel="workers", ylabel="seconds (median epoch)")
    ax_time.set_ylim(bottom=0)
    rates = [r["examples_per_s"] for r in rows]
    ax_rate.plot(workers, rates, marker="o", label="measured")
    if rows:
        base = rates[0] / workers[0]
        ax_rate.plot(workers, [base * w for w in workers], linestyle="--", color="gray", label="linear")
    for r in rows:
        ax_rate.annotate(f"eff {r['efficiency']:.0%}", (r["workers"], r["examples_per_s"]),
                         textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax_rate.set(title="Throughput", xlabel="workers", ylabel="examples / s")
    ax_rate.legend()
    for ax in (ax_time, ax_rate):
        ax.set_xticks(workers)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    return _save(plt, fig, path)


def anomaly_scores(scored: Any, path: Path) -> Path:
    """The scoring panel: the error histogram with the threshold, and each instance's error with the injected
    anomalies marked. ``scored`` is ``landfall.local.anomalies.score_injected``'s result (or its ``as_dict()``)."""
    s = scored if isinstance(scored, dict) else scored.as_dict()
    plt = _pyplot()
    fig, (ax_hist, ax_err) = plt.subplots(1, 2, figsize=(12, 4.5))
    _error_histogram(ax_hist, s)
    errors, injected = s["errors"], set(s["injected"])
    ax_err.scatter(range(len(errors)), errors, s=6, color="tab:blue", label="instances")
    ax_err.scatter(sorted(injected), [errors[i] for i in sorted(injected)], s=30, facecolors="none",
                   edgecolors="tab:orange", label="injected anomalies")
    ax_err.axhline(s["threshold"], color="red", linestyle="--", label="threshold")
    ax_err.set_yscale("log")
    caught = len(set(s["flagged"]) & injected)
    ax_err.set(title=f"{caught} of {len(injected)} injected flagged, "
                     f"{len(set(s['flagged']) - injected)} false alarms of {len(errors) - len(injected)}",
               xlabel="instance", ylabel="reconstruction MSE")
    ax_err.grid(alpha=0.3)  # the histogram's panel has its grid and legend from _error_histogram
    ax_err.legend(fontsize=8)
    return _save(plt, fig, path)


def series_scores(s: dict[str, Any], path: Path) -> Path:
    """A scored series (``landfall.views.page.read_scored``): the score over time, the threshold, the anomalous
    ranges shaded and the labelled ranges, if any, as a band along the bottom."""
    from datetime import UTC, datetime

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(14, 4.5))

    def when(t: float) -> Any:
        return datetime.fromtimestamp(t, UTC) if s.get("time") == "timestamp" else t

    xs = [when(t) for t in s["times"]]
    ax.plot(xs, [float("nan") if v is None else v for v in s["scores"]], linewidth=0.8, color="tab:blue",
            label=f"score ({s.get('combine')} of the windows over each moment)")
    ax.axhline(s["threshold"], color="red", linestyle="--", label="threshold")
    for i, r in enumerate(s["ranges"]):
        ax.axvspan(when(r["start"]), when(r["end"]), color="tab:red", alpha=0.25, lw=0,
                   label="anomalous ranges" if i == 0 else None)
    for i, r in enumerate(s["labelled_ranges"]):
        ax.axvspan(when(r["start"]), when(r["end"]), ymax=0.04, color="tab:orange", lw=0,
                   label="labelled anomalous" if i == 0 else None)
    title = f"{s['name']}: {len(s['ranges'])} anomalous ranges"
    m = s.get("labelled")
    if m:
        def f(v: Any) -> str:
            return "-" if v is None else f"{v:.2f}"

        title += (f"; point-wise P {f(m['point']['precision'])} R {f(m['point']['recall'])}, range-based "
                  f"P {f(m['range']['precision'])} R {f(m['range']['recall'])}")
    ax.set(title=title, xlabel="time", ylabel="reconstruction MSE")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _error_histogram(ax: Any, s: dict[str, Any]) -> None:
    edges, counts = s["histogram"]["edges"], s["histogram"]["counts"]
    if counts:
        ax.stairs(counts, edges, fill=True, alpha=0.6, label="errors of the scored file")
        ax.set_xscale("log")
    quantile = f"p{s['quantile'] * 100:g}" if s.get("quantile") else "threshold"
    ax.axvline(s["threshold"], color="red", linestyle="--", label=f"threshold ({quantile} of held-out errors)")
    ax.set(title="Reconstruction error of a scored file", xlabel="reconstruction MSE", ylabel="instances")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
