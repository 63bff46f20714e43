"""The baselines as detectors that can be served: the model's serving contract, so any of them can be champion.

A champion is a folder that ``core.scoring.Scorer.load`` reads: a SavedModel whose ``serving_default`` signature
takes ``x`` (float32 ``[n, T, F]``, normalised with ``normalization.json``'s per-feature ``mean`` and ``std``) and
returns ``reconstruction`` (the same shape, normalised) or, for a detector that scores (``trainer.judging.baselines``),
``row_scores`` (``[n, T]``), with ``normalization.json`` (its ``unit``: how a scoring detector's rows are located when
it declares one) and ``threshold.json`` beside it.
The model's folder is ``runs/<job>/model``; a baseline the verdict picks (``trainer.judging.verdict``) is saved the same
way in ``runs/<job>/detectors/<name>``, so the scorer service, ``landfall score``, the champion view and ``landfall
rescore`` serve it unchanged: nothing downstream knows or asks which kind of detector it is (``normalization.json``'s
``kind`` says it, for people).

What each computes, in the standardised space ``trainer.judging.baselines.Panel`` fitted it in (the job's statistics,
the flattened ``D = T x F`` window ``z``), in float32: ``mean_window`` the training set's mean window, whatever the
input; every registered detector (``trainer.judging.baselines.KINDS``: ``pca``, ``nearest_neighbour``, ``kmeans``, ...)
its own ``serving`` function, the graph of its ``reconstruct`` or ``row_scores``. The constants are variables of the
SavedModel (``variables/``), not graph constants. Reconstruction errors match the
panel's float64 ones to float32 rounding, and so do a scoring detector's scores (``tests/trainer/test_detectors.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np

from landfall.core import scoring
from landfall.core.artifacts.champion import ALONE, NORMALIZATION, RECONSTRUCTION, ROW_SCORES, UNIT
from trainer.judging import baselines

FOLDER = "detectors"  # runs/<job>/detectors/<name>


def folder(name: str) -> str:
    """The detector's folder in the job dir."""
    return f"{FOLDER}/{name}"


def job_dir_of(model: str) -> str:
    """The job dir a champion's folder is in: ``<job dir>/model`` (the model) or ``<job dir>/detectors/<name>``."""
    model = model.rstrip("/")
    head, _, last = model.rpartition("/")
    if head.endswith("/" + FOLDER):
        return head[: -len("/" + FOLDER)]
    return head if last else model


def save(panel: baselines.Panel, name: str, local: str | Path) -> Path:
    """Saves baseline ``name`` of ``panel`` as a servable folder at ``local`` (SavedModel and ``normalization.json``;
    the verdict writes ``threshold.json``). ``ValueError`` for a baseline the panel could not fit."""
    import tensorflow as tf

    t, f = panel.shape
    d = t * f
    local = Path(local)
    module = tf.Module()
    output, unit, alone = RECONSTRUCTION, None, False
    if name == baselines.MEAN_WINDOW:
        window = ((panel.mean_window.window - panel.mean) / panel.std).reshape(1, d)
        module.window = tf.Variable(window.astype(np.float32), trainable=False, name="window")

        def compute(z):
            return tf.tile(module.window, [tf.shape(z)[0], 1])
    elif name in baselines.KINDS:
        fitted = panel.kinds.get(name)
        if fitted is None:
            raise ValueError(f"{name} was not fitted (no training window, or it does not apply to windows of "
                             f"{f} channels)")
        compute = fitted.serving(module)
        if baselines.scores(fitted):  # it scores each window row: served as those scores ([n, T])
            output, unit, alone = ROW_SCORES, panel.unit(name), bool(getattr(fitted, "alone", False))
    else:
        raise ValueError(f"no detector {name!r} (one of {', '.join(baselines.NAMES)})")
    out_shape = [-1, t] if output == ROW_SCORES else [-1, t, f]

    @tf.function(input_signature=[tf.TensorSpec([None, t, f], tf.float32, name="x")])
    def serve(x):
        z = tf.reshape(x, [-1, d])
        return {output: tf.reshape(compute(z), out_shape)}

    module.serve = serve
    tf.saved_model.save(module, str(local), signatures={"serving_default": serve})
    (local / NORMALIZATION).write_text(json.dumps({
        "shape": [t, f], "dtype": "float32", "normalized": True, "mean": panel.mean.tolist(),
        "std": panel.std.tolist(), scoring.ERROR_SCALE: panel.scale.tolist() if panel.scale is not None else None,
        "kind": name, "description": baselines.DESCRIPTIONS[name], "output": output, UNIT: unit, ALONE: alone,
        "statistics": "this job's inputs (count-weighted over its manifests)", "training_instances": (
            panel.describe()[name].get("training_instances")),
    }, indent=2))
    return local
