"""A job whose model its verdict can never serve holds no GPU (landfall.submit.unserved, issue #55).

The submit side decides from the flags the job renders; the trainer decides what to serve from the same flags
(trainer.judging.selection.basis). The property test ties the two: whatever the flags, the job loses its GPUs exactly
when the trainer, parsing them, would serve the fixed choice for rows by detection.
"""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from landfall.core.artifacts import specs
from landfall.core.config import ENGINES
from landfall.submit import coalesce, engine, unserved
from landfall.submit.config import JobConfig
from landfall.submit.handler import handle_message
from tests.support import convert_arrival, engine_of, runtime
from trainer.judging import selection
from trainer.task import parse_config

GPU = "nvidia.com/gpu"


def series_spec(combine: str | None = "row", resources: dict | None = None, verdict: dict | None = None
                ) -> specs.DatasetSpec:
    window = {"length": 16, **({"combine": combine} if combine else {})}
    doc = {"apiVersion": specs.API_VERSION, "name": "servers", "shape": {"window": window},
           "arrival": {"series": {"time_column": "t", "channels": ["a", "b"]}}}
    if resources:
        doc["resources"] = resources
    if verdict:
        doc["verdict"] = verdict
    return specs.DatasetSpec.from_document(specs.validate(doc, "servers.yaml"), 5)


def deployment(**over) -> JobConfig:
    return JobConfig.load({}, **{"bucket": "b", "workers": 4, "gpus_per_worker": 2, **over})


@pytest.mark.parametrize("name", ENGINES)
def test_rows_without_labels_render_a_one_worker_job_without_gpus(name):
    backend = "customjobs" if name == "vertex" else "kubernetes"
    cfg = coalesce.with_spec(deployment(engine=name, backend=backend), "servers", series_spec())
    assert (cfg.gpus_per_worker, cfg.workers) == (0, 1)
    job = engine.render(cfg, name="servers-1", dataset="servers", inputs_uri="gs://b/runs/servers-1/inputs.json",
                        request_id="r", released_at="2026-12-06T00:00:00Z", runs_prefix="runs/")
    text = json.dumps(job)
    assert GPU not in text and "acceleratorCount" not in text and engine.workers_of(job) == 1
    assert "without GPUs on 1 worker" in (unserved.why(cfg) or "")
    kept = coalesce.with_spec(deployment(engine=name, backend=backend), "servers", series_spec(combine=None))
    text = json.dumps(engine.render(kept, name="servers-1", dataset="servers", inputs_uri="gs://b/i.json",
                                    request_id="r", released_at="2026-12-06T00:00:00Z", runs_prefix="runs/"))
    assert ('"acceleratorCount": 2' if name == "vertex" else GPU) in text


@pytest.mark.parametrize("spec, gpus, workers", [
    (series_spec(combine=None), 2, 4),  # mean: the surrogate may choose the model
    (series_spec(combine="max"), 2, 4),
    (series_spec(verdict={"select": "loss"}), 2, 4),  # by loss the model is what is served
    (series_spec(resources={"gpus_per_worker": 1}), 1, 4),  # what the spec says is kept
    (series_spec(resources={"workers": 3}), 0, 3),
    (series_spec(resources={"gpus_per_worker": 0, "workers": 2}), 0, 2),
])
def test_what_keeps_the_gpus_and_what_the_spec_keeps(spec, gpus, workers):
    cfg = coalesce.with_spec(deployment(), "servers", spec)
    assert (cfg.gpus_per_worker, cfg.workers) == (gpus, workers)


def test_a_labelled_set_keeps_the_gpus_and_a_spec_that_asks_for_them_is_warned():
    labelled = deployment(trainer_args=("--labelled", "gs://b/config/labelled/servers/x.npz"))
    assert coalesce.with_spec(labelled, "servers", series_spec()).gpus_per_worker == 2
    asked = coalesce.with_spec(deployment(), "servers", series_spec(resources={"gpus_per_worker": 1}))
    assert "asks for 1 GPU(s) per worker" in (unserved.why(asked) or "")
    assert unserved.why(coalesce.with_spec(deployment(), "servers", series_spec(combine=None))) is None


def test_the_deployments_flags_count_and_the_specs_come_last():
    rows = deployment(trainer_args=("--combine", "row"))
    assert coalesce.with_spec(rows, "fleet", specs.DatasetSpec("fleet")).gpus_per_worker == 0  # no spec at all
    assert coalesce.with_spec(rows, "servers", series_spec(combine="mean")).gpus_per_worker == 2  # the spec wins


FLAGS = st.lists(st.sampled_from([
    ("--combine", "row"), ("--combine", "mean"), ("--combine", "max"), ("--select", "loss"),
    ("--select", "detection"), ("--labelled", "gs://b/config/labelled/d/x.npz"), ("--labelled", "")]), max_size=5)


@settings(max_examples=60, deadline=None)
@given(FLAGS, FLAGS)
def test_no_gpu_exactly_when_the_trainer_would_serve_the_fixed_choice(deployed, spec_flags):
    args = tuple(x for pair in deployed for x in pair)
    spec = tuple(x for pair in spec_flags for x in pair)
    cfg = coalesce.with_spec(deployment(trainer_args=args + spec), "d", specs.DatasetSpec("d"))
    trainer = parse_config(["--inputs", "gs://b/runs/j/inputs.json", "--job-dir", "gs://b/runs/j", *args, *spec],
                           env={})
    served_fixed = (trainer.select == "detection"
                    and selection.basis(bool(trainer.labelled), trainer.combine) == selection.FIXED_FOR_ROWS)
    assert (cfg.gpus_per_worker == 0) == served_fixed
    assert cfg.workers == (1 if served_fixed else 4)


def test_the_released_job_holds_no_gpu_and_says_why(emulator_stack, bucket, backend, tmp_path, caplog):
    storage, dataset = emulator_stack.storage, "by-rows"
    rt = runtime(emulator_stack, bucket, backend, engine=engine_of(backend), gpus_per_worker=1, workers=3,
                 trainer_args=("--combine", "row"))
    request = convert_arrival(storage, bucket, dataset, tmp_path)
    with caplog.at_level(logging.INFO, logger="landfall.submit.coalesce"):
        assert handle_message(request.to_json(), {}, rt) == "submitted"
    (job,) = backend.list(dataset)
    assert engine.workers_of(job) == 1
    assert all(GPU not in c["resources"].get("limits", {}) for c in engine.containers_of(job))
    assert any("its model cannot be served" in r.getMessage() and "without GPUs" in r.getMessage()
               for r in caplog.records)
