"""Every plot the report and the demo draw names its axes and, when it draws more than one series, has a legend that
names each: the report's inline SVG (``landfall.views.page.*_svg``) read back as XML, and the matplotlib figures of
``landfall.local.plots`` inspected before they are saved. Each check is shown to fail on a plot without the names.

Every ``*_svg`` function of the report and every public function of ``plots`` must have an input below, so a new plot
is checked too (``test_every_plot_is_checked``)."""

from __future__ import annotations

import inspect
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from landfall.local import plots
from landfall.views import page

SVG = "{http://www.w3.org/2000/svg}"
MARKS = ("polyline", "line", "rect", "circle", "path", "polygon")


def svg_problems(svg: str) -> list[str]:
    """What an inline SVG plot lacks: a named x axis (and y axis, unless it declares ``data-axes="x"``), a series
    key on every mark (its ``data-series``, else its class; ``axis`` lines are not series), and, with more than one
    series, a legend entry (``data-for``) with a name for each."""
    root = ET.fromstring(svg)
    what = root.get("aria-label") or root.get("class")
    problems = []
    labels = {t.get("data-axis"): "".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")
              if "axis-label" in (t.get("class") or "").split()}
    for axis in root.get("data-axes", "xy"):
        if not labels.get(axis):
            problems.append(f"{what}: no {axis} axis label")
    legend_nodes = {id(n) for g in root.iter(f"{SVG}g") if "legend" in (g.get("class") or "").split()
                    for n in g.iter()}
    series = set()
    for el in root.iter():
        if el.tag.removeprefix(SVG) not in MARKS or id(el) in legend_nodes:
            continue
        key = el.get("data-series") or (el.get("class") or "").split(" ")[0]
        if key == "axis":
            continue
        if not key:
            problems.append(f"{what}: a <{el.tag.removeprefix(SVG)}> with no series (no class, no data-series)")
        series.add(key)
    named = {t.get("data-for"): "".join(t.itertext()).strip() for g in root.iter(f"{SVG}g")
             if "legend" in (g.get("class") or "").split() for t in g.iter(f"{SVG}text")}
    if len(series) > 1:
        missing = sorted(k for k in series if not named.get(k))
        if missing:
            problems.append(f"{what}: {len(series)} series, none in the legend for {missing}")
    return problems


def _unnamed(artist: Any) -> bool:
    label = artist.get_label()
    return not label or label.startswith("_")


def figure_problems(fig: Any) -> list[str]:
    """What a matplotlib figure's panels lack: axis labels and, with more than one artist, a label on every line and
    collection and a legend holding every label; an unlabelled patch must repeat a labelled one's colour (the second
    of several shaded ranges, say)."""
    problems = []
    for ax in fig.axes:
        title = ax.get_title() or "a panel"
        if not ax.get_xlabel():
            problems.append(f"{title}: no x axis label")
        if not ax.get_ylabel():
            problems.append(f"{title}: no y axis label")
        lines, patches = list(ax.lines) + list(ax.collections), list(ax.patches)
        if len(lines) + len(patches) < 2:
            continue  # one series: the axis labels name it
        problems += [f"{title}: an unlabelled {type(a).__name__}" for a in lines if _unnamed(a)]
        named = [a for a in lines + patches if not _unnamed(a)]
        colours = {tuple(p.get_facecolor()) for p in patches if not _unnamed(p)}
        problems += [f"{title}: an unlabelled {type(p).__name__}" for p in patches
                     if _unnamed(p) and tuple(p.get_facecolor()) not in colours]
        legend = ax.get_legend()
        shown = {t.get_text() for t in legend.get_texts()} if legend else set()
        missing = sorted({a.get_label() for a in named} - shown)
        if legend is None or missing:
            problems.append(f"{title}: {len(lines) + len(patches)} series, the legend lacks {missing}")
    return problems


# -- inputs: one of every plot --------------------------------------------------------------------------------------
SCORED = {"histogram": {"edges": [0.01, 0.1, 1.0, 10.0], "counts": [40, 8, 2]}, "threshold": 2.0, "quantile": 0.99,
          "errors": [0.05] * 20 + [5.0, 6.0], "injected": [20, 21], "flagged": [20, 21]}


def _series() -> dict[str, Any]:
    times = [float(t) for t in range(40)]
    scores = [None, None, None] + [0.05] * 14 + [0.6, 1.1, 1.7, 2.2, 1.7, 1.1, 0.6] + [0.05] * 16
    return {"name": "pump/a", "dataset": "pump", "model": "gs://b/runs/job-1/model", "threshold": 0.4,
            "time": "number", "combine": "mean", "rows": 40, "times": times, "scores": scores,
            "ranges": [{"start": 17.0, "end": 23.0, "peak": 20.0, "peak_score": 2.2, "rows": 7}],
            "labelled_ranges": [{"start": 20.0, "end": 20.0}], "labelled": None}


SVG_INPUTS: dict[str, tuple[Any, ...]] = {
    "loss_svg": ([{"epoch": 1, "loss": 1.0, "val_loss": 1.2}, {"epoch": 2, "loss": 0.5, "val_loss": 0.7}],),
    "timeline_svg": ({"summary": [{"phase": "reading the manifests"}, {"phase": "epochs", "count": 1}],
                      "workers": [{"worker": w, "phases": [
                          {"phase": "reading the manifests", "start_s": 0.0, "seconds": 1.0},
                          {"phase": "epoch", "epoch": 1, "start_s": 1.0, "seconds": 2.0}]} for w in (0, 1)]},),
    "histogram_svg": ({"value": 0.5, "quantiles": {"p50": 0.1, "p95": 0.3, "p99": 0.5, "p99.9": 0.9}},),
    "shift_svg": ({"reference": [0.5, 0.3, 0.2], "arrival": [0.1, 0.2, 0.7], "edges": [0.0, 1.0]},),
    "arrivals_svg": ([{"arrival_id": "a", "state": "converted", "at": "2024-05-01T00:00:00Z"},
                      {"arrival_id": "b", "state": "quarantined", "at": "2024-05-01T00:10:00Z"},
                      {"arrival_id": "c", "state": "rejected", "at": "2024-05-01T00:20:00Z"}],),
    "scored_svg": (_series(),),
}

FIGURE_INPUTS: dict[str, tuple[Any, ...]] = {
    "training_curves": ([{"job": "job-1", "num_workers": 2, "epochs": [
        {"epoch": 1, "loss": 1.0, "val_loss": 1.2, "wall_s": 3.0}, {"epoch": 2, "loss": 0.5, "val_loss": 0.7,
                                                                   "wall_s": 2.5}]}], None, SCORED),
    "scaling": ([{"workers": 1, "epoch_s": 10.0, "examples_per_s": 100.0, "efficiency": 1.0},
                 {"workers": 2, "epoch_s": 6.0, "examples_per_s": 170.0, "efficiency": 0.85}], None, "scaling"),
    "anomaly_scores": (SCORED, None),
    "series_scores": (_series(), None),
}


def _svg_functions() -> list[str]:
    return sorted(n for n, f in inspect.getmembers(page, inspect.isfunction)
                  if n.endswith("_svg") and f.__module__ == page.__name__)


def _figure_functions() -> list[str]:
    return sorted(n for n, f in inspect.getmembers(plots, inspect.isfunction)
                  if not n.startswith("_") and f.__module__ == plots.__name__)


def test_every_plot_is_checked():
    assert _svg_functions() == sorted(SVG_INPUTS)
    assert _figure_functions() == sorted(FIGURE_INPUTS)


@pytest.mark.parametrize("name", sorted(SVG_INPUTS))
def test_each_report_plot_names_its_axes_and_series(name):
    svg = getattr(page, name)(*SVG_INPUTS[name])
    assert svg.startswith("<svg"), svg[:200]
    assert svg_problems(svg) == []


def test_the_svg_check_fails_on_a_plot_without_names():
    bare = ('<svg xmlns="http://www.w3.org/2000/svg"><line class="axis" x1="0" y1="0" x2="1" y2="0"/>'
            '<polyline class="loss" points="0,0 1,1"/><polyline class="val_loss" points="0,1 1,0"/><rect x="0"/>'
            '</svg>')
    problems = svg_problems(bare)
    assert any("no x axis label" in p for p in problems) and any("no y axis label" in p for p in problems)
    assert any("none in the legend" in p for p in problems) and any("no series" in p for p in problems)
    # Named axes and a legend that names one of the two series: still a problem.
    half = bare.replace("<rect x=\"0\"/>", "").replace(
        "</svg>", '<text class="axis-label" data-axis="x">epoch</text><text class="axis-label" data-axis="y">'
                  'loss</text><g class="legend"><text data-for="loss">train</text></g></svg>')
    assert svg_problems(half) == ["None: 2 series, none in the legend for ['val_loss']"]


@pytest.fixture
def figures(monkeypatch):
    """The figures ``plots`` draws, caught as they are saved (matplotlib's ``Figure.savefig``)."""
    from matplotlib.figure import Figure

    caught: list[Any] = []
    save = Figure.savefig

    def keep(fig, *args, **kwargs):
        caught.append(fig)
        fig.canvas.draw()  # the legend and labels as drawn
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return caught


@pytest.mark.parametrize("name", sorted(FIGURE_INPUTS))
def test_each_figure_names_its_axes_and_series(name, figures, tmp_path):
    args = [tmp_path / f"{name}.png" if a is None else a for a in FIGURE_INPUTS[name]]
    path = getattr(plots, name)(*args)
    assert path.stat().st_size > 5_000 and len(figures) == 1
    assert figure_problems(figures[0]) == []


def test_the_figure_check_fails_on_a_plot_without_names():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0], label="train")
    ax.plot([0, 1], [0, 1])
    ax.axvspan(0.2, 0.3, color="tab:red")
    try:
        problems = figure_problems(fig)
    finally:
        plt.close(fig)
    assert "a panel: no x axis label" in problems and "a panel: no y axis label" in problems
    assert "a panel: an unlabelled Line2D" in problems
    assert any("an unlabelled" in p and "Line2D" not in p for p in problems)  # the unnamed shaded span
    assert "a panel: 3 series, the legend lacks ['train']" in problems
