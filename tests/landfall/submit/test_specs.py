"""The submit stage honours each dataset's spec (landfall.core.artifacts.specs), on both engines and both backends: the
job
is rendered from the generation in force when it is released, which ``inputs.json`` records, so a spec changed
between two arrivals reaches the next job and never the one already running."""

from __future__ import annotations

import pytest

from landfall.cli import status
from landfall.core.artifacts import specs
from landfall.core.errors import Invalid
from landfall.submit import coalesce, engine, jobmeta
from landfall.submit.backends.local import LocalBackend
from landfall.submit.handler import handle_message
from landfall.submit.ledger import Ledger
from tests.support import convert_arrival, copy_arrival, engine_of, inputs_of, pending_of, runtime, set_state


def spec(dataset: str, **sections) -> dict:
    return {"apiVersion": specs.API_VERSION, "name": dataset, **sections}


def args_of(job: dict) -> list[str]:
    (container,) = engine.containers_of(job)
    return list(container["args"])


def flag(args: list[str], name: str) -> str:
    return args[len(args) - 1 - args[::-1].index(name) + 1]  # the last one: argparse's


def test_a_spec_changed_between_two_arrivals_reaches_the_next_job_only(emulator_stack, bucket, backend, tmp_path):
    storage, dataset = emulator_stack.storage, "pump"
    g1, _ = specs.apply(storage, bucket, spec(
        dataset, model={"units": [16, 8]}, training={"epochs": 2, "learning_rate": 0.01},
        resources={"workers": 2, "cpu": "1", "memory": "2Gi"}, verdict={"threshold_quantile": 0.9}))
    rt = runtime(emulator_stack, bucket, backend, engine=engine_of(backend), trainer_args=("--seed", "7"))
    first = convert_arrival(storage, bucket, dataset, tmp_path)
    assert handle_message(first.to_json(), {}, rt) == "submitted"
    (running,) = backend.list(dataset)
    set_state(backend, jobmeta.name_of(running), "Running")
    args = args_of(running)
    assert (flag(args, "--units"), flag(args, "--epochs"), flag(args, "--learning-rate"),
            flag(args, "--threshold-quantile"), flag(args, "--seed"), flag(args, "--spec-generation")) == (
        "16,8", "2", "0.01", "0.9", "7", str(g1))
    assert engine.workers_of(running) == 2
    assert engine.containers_of(running)[0]["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert inputs_of(storage, running).spec_generation == g1

    g2, _ = specs.apply(storage, bucket, spec(dataset, model={"units": [32]}, training={"epochs": 3},
                                              resources={"workers": 3}))
    shown = status.collect(rt.config, storage, backend, dataset)["datasets"][dataset]["spec"]
    assert shown == {"uri": specs.spec_uri(bucket, dataset, rt.layout), "generation": g2} and g2 != g1
    second = copy_arrival(storage, first, 1)
    assert handle_message(second.to_json(), {}, rt) == "coalesced"
    kept = backend.get(jobmeta.name_of(running))  # the job already running keeps the old generation
    assert args_of(kept) == args and engine.workers_of(kept) == 2
    set_state(backend, jobmeta.name_of(running), "Succeeded")
    (follow_up,) = coalesce.reconcile(backend, storage, rt.config, dataset=dataset)
    job = backend.get(follow_up)
    args = args_of(job)
    assert (flag(args, "--units"), flag(args, "--epochs"), flag(args, "--spec-generation")) == ("32", "3", str(g2))
    assert "--threshold-quantile" not in args  # g2 leaves it unset: the trainer's own default
    assert engine.workers_of(job) == 3 and inputs_of(storage, job).spec_generation == g2
    assert engine.containers_of(job)[0]["resources"]["requests"] == {"cpu": rt.config.cpu_request,
                                                                     "memory": rt.config.memory_request}


def test_a_job_recreated_after_a_crash_keeps_the_generation_it_was_released_with(emulator_stack, bucket, tmp_path):
    storage, dataset = emulator_stack.storage, "crash"
    backend = LocalBackend(tmp_path / "state")
    g1, _ = specs.apply(storage, bucket, spec(dataset, training={"epochs": 4}))
    rt = runtime(emulator_stack, bucket, backend)
    request = convert_arrival(storage, bucket, dataset, tmp_path)
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    (job,) = backend.list(dataset)
    name = jobmeta.name_of(job)
    backend.delete(name)  # as if the release had died between inputs.json and the job
    storage.delete(Ledger(storage, bucket, rt.layout).inputs_uri(name).replace("inputs.json", "submitted.json"))
    specs.apply(storage, bucket, spec(dataset, training={"epochs": 9}))
    assert handle_message(copy_arrival(storage, request, 1).to_json(), {}, rt) == "coalesced"
    assert flag(args_of(backend.get(name)), "--epochs") == "4"
    assert flag(args_of(backend.get(name)), "--spec-generation") == str(g1)


def test_a_spec_the_deployment_cannot_run_rejects_its_requests_and_never_sticks_the_dataset(emulator_stack, bucket,
                                                                                          tmp_path):
    storage, dataset = emulator_stack.storage, "other-engine"
    backend = LocalBackend(tmp_path / "state")
    specs.apply(storage, bucket, spec(dataset, resources={"engine": "jobset"}))
    rt = runtime(emulator_stack, bucket, backend)  # a tfjob deployment
    request = convert_arrival(storage, bucket, dataset, tmp_path)
    assert handle_message(request.to_json(), {}, rt) == "duplicate"  # recorded, then rejected at the release
    assert backend.list(dataset) == [] and pending_of(storage, bucket, dataset) == []
    rejected = storage.list(f"gs://{bucket}/rejected/{dataset}/")
    assert len(rejected) == 1 and b"this deployment runs 'tfjob'" in storage.read_bytes(rejected[0])
    specs.apply(storage, bucket, spec(dataset, resources={"engine": "tfjob"}))
    assert handle_message(copy_arrival(storage, request, 1).to_json(), {}, rt) == "submitted"


def test_registered_refuses_requests_of_datasets_without_a_spec(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    backend = LocalBackend(tmp_path / "state")
    rt = runtime(emulator_stack, bucket, backend, datasets="registered")
    request = convert_arrival(storage, bucket, "nospec", tmp_path)
    with pytest.raises(Invalid, match="unknown_dataset"):
        coalesce.submit(request, rt.config, backend, storage)
    assert handle_message(request.to_json(), {}, rt) == "rejected"
    assert storage.list(f"gs://{bucket}/rejected/nospec/") and backend.list("nospec") == []
    specs.apply(storage, bucket, spec("nospec"))
    assert handle_message(request.to_json(), {}, rt) == "submitted"


def test_render_job_prints_the_job_as_the_release_renders_it_from_the_spec(emulator_stack, bucket, tmp_path, capsys):
    import yaml

    from landfall.cli import main as cli

    storage, dataset = emulator_stack.storage, "rendered"
    specs.apply(storage, bucket, spec(dataset, model={"units": [8]}, resources={"workers": 3}))
    request = convert_arrival(storage, bucket, dataset, tmp_path)
    assert cli(["render-job", "--manifest", request.manifest, "--request-id", request.request_id]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    rt = runtime(emulator_stack, bucket, LocalBackend(tmp_path / "state"), gpus_per_worker=1)
    assert handle_message(request.to_json(), {}, rt) == "submitted"
    (submitted,) = rt.backend.list(dataset)
    assert submitted["spec"] == printed["spec"] and engine.workers_of(printed) == 3
    assert flag(args_of(printed), "--units") == "8"


def test_a_spec_retrain_section_is_the_dataset_policy_over_the_environment(emulator_stack, bucket, tmp_path):
    storage = emulator_stack.storage
    backend = LocalBackend(tmp_path / "state")
    rt = runtime(emulator_stack, bucket, backend)
    specs.apply(storage, bucket, spec("quiet", retrain={"quiet_s": 10}))
    quiet, eager = convert_arrival(storage, bucket, "quiet", tmp_path), convert_arrival(storage, bucket, "eager",
                                                                                         tmp_path, seed=1)
    decision = coalesce.submit(quiet, rt.config, backend, storage)
    assert decision.outcome == "held" and "quiet period" in decision.detail
    assert coalesce.submit(eager, rt.config, backend, storage).outcome == "submitted"  # no spec: today's policy
    assert coalesce.policy_for("quiet", rt.config, storage).quiet_s == 10
