"""The Vertex AI ``CustomJob`` a released job becomes on the managed engine (``landfall.submit.vertex``, issue #57),
checked against Google's own client: every body parses as ``google.cloud.aiplatform_v1.types.CustomJob`` (strictly:
a field the API does not have fails), and the published rules the module writes down as data hold (the machine and
accelerator pairs, the label rules, the scheduling strategies, every ``JobState``)."""

from __future__ import annotations

import json
import re

import pytest
from google.cloud.aiplatform_v1.types import AcceleratorType, CustomJob, JobState, Scheduling
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from landfall.submit import jobmeta, tfjob, vertex
from landfall.submit.config import JobConfig
from trainer.training.cluster import Cluster

BASE = {"bucket": "data-bkt", "project": "proj-1", "trainer_image": "us-docker.pkg.dev/proj-1/landfall/trainer:v1"}
NAME, DATASET, REQUEST, INPUTS = "pumps-0123456789", "pumps", "a" * 64, "gs://data-bkt/runs/pumps-0123456789/in.json"


def body(**overrides) -> dict:
    cfg = JobConfig.load({}, **BASE, **overrides)
    return vertex.custom_job(cfg, name=NAME, dataset=DATASET, request_id=REQUEST, inputs_uri=INPUTS)


def parsed(doc: dict) -> CustomJob:
    return CustomJob.from_json(json.dumps(doc), ignore_unknown_fields=False)


@pytest.mark.parametrize(("workers", "gpus", "accelerator", "capacity"), [
    (1, 0, "nvidia-l4", "standard"), (2, 1, "nvidia-l4", "spot"), (4, 2, "nvidia-l4", "flex_start"),
    (3, 8, "nvidia-h100-80gb", "standard"), (2, 4, "nvidia-tesla-a100", "spot"), (2, 1, "nvidia-tesla-t4", "standard"),
])
def test_every_custom_job_parses_as_the_clients_own_message(workers, gpus, accelerator, capacity):
    job = parsed(body(workers=workers, gpus_per_worker=gpus, accelerator=accelerator, capacity=capacity,
                      active_deadline_seconds=7200, flex_max_wait_seconds=1800))
    pools = job.job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == ([1, workers - 1] if workers > 1 else [1])
    for pool in pools:
        if gpus:
            assert pool.machine_spec.accelerator_type == AcceleratorType[vertex.ACCELERATORS[accelerator]]
            assert pool.machine_spec.accelerator_count == gpus
            assert pool.machine_spec.machine_type == vertex.MACHINES[(vertex.ACCELERATORS[accelerator], gpus)]
        else:
            assert pool.machine_spec.machine_type == vertex.CPU_MACHINE and not pool.machine_spec.accelerator_count
        assert pool.container_spec.image_uri == BASE["trainer_image"]
    scheduling = job.job_spec.scheduling
    assert scheduling.strategy == Scheduling.Strategy[vertex.STRATEGIES[capacity]]
    assert scheduling.timeout.total_seconds() == 7200 and scheduling.restart_job_on_worker_restart
    assert (scheduling.max_wait_duration.total_seconds() == 1800) == (capacity == "flex_start")
    assert job.job_spec.service_account == "landfall-trainer@proj-1.iam.gserviceaccount.com"
    assert job.job_spec.base_output_directory.output_uri_prefix == "gs://data-bkt/runs/pumps-0123456789"
    assert job.display_name == NAME


def test_the_trainer_gets_the_tfjobs_command_arguments_and_environment():
    cfg = JobConfig.load({}, **BASE, trainer_args=("--units", "16,8"))
    kube = tfjob.render(cfg, name=NAME, dataset=DATASET, request_id=REQUEST, inputs_uri=INPUTS)
    job = vertex.render(cfg, name=NAME, dataset=DATASET, request_id=REQUEST, inputs_uri=INPUTS)
    (theirs,) = tfjob.containers_of(kube)
    for ours in vertex.containers_of(job):
        assert {k: ours[k] for k in ("image", "command", "args", "env")} == {
            k: theirs[k] for k in ("image", "command", "args", "env")}
    assert vertex.workers_of(job) == tfjob.workers_of(kube) == 2
    assert jobmeta.bucket_in(vertex.containers_of(job)) == "data-bkt"
    assert job["metadata"]["labels"] == kube["metadata"]["labels"]
    assert job["metadata"]["namespace"] == "projects/proj-1/locations/us-central1"


def test_a_field_the_api_lacks_or_a_wrong_type_is_refused_by_the_client():
    doc = body()
    parsed(doc)
    with pytest.raises(json_format.ParseError, match='no field named "workerPools"'):
        parsed({**doc, "workerPools": []})  # no such field
    broken = json.loads(json.dumps(doc))
    broken["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "one"
    with pytest.raises(json_format.ParseError, match="replicaCount"):
        parsed(broken)


def test_an_unpublished_machine_or_accelerator_is_refused_before_anything_is_sent():
    with pytest.raises(ValueError, match=r"3 x NVIDIA_L4 per replica: Vertex AI attaches \[1, 2, 4, 8\]"):
        body(gpus_per_worker=3)
    with pytest.raises(ValueError, match="accelerator 'nvidia-gb200' has no Vertex AI type"):
        body(accelerator="nvidia-gb200")
    with pytest.raises(ValueError, match="capacity must be one of"):
        body(capacity="preemptible")
    assert all(k in AcceleratorType.__members__ for k in vertex.ACCELERATORS.values())  # the client's own enum


def test_every_state_of_the_client_is_mapped_and_waiting_is_not_finished():
    assert set(vertex.STATES) == {s.name for s in JobState}  # a state the client adds fails here
    assert set(vertex.STRATEGIES.values()) <= set(Scheduling.Strategy.__members__)
    job = {"spec": {}, "status": {"state": "JOB_STATE_QUEUED"}}
    assert vertex.is_suspended(job) and not vertex.is_finished(job)
    failed = {"status": {"state": "JOB_STATE_FAILED", "error": {"code": 8, "message": "quota"}}}
    assert vertex.is_finished(failed) and vertex.conditions(failed)[0] == {
        "type": "Failed", "status": "True", "reason": "JOB_STATE_FAILED", "message": "quota"}
    assert vertex.state({"status": {"state": "JOB_STATE_CANCELLED"}}) == "Failed"


@settings(max_examples=200, deadline=None)
@given(dataset=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}", fullmatch=True),
       request=st.text(min_size=1, max_size=300))
def test_labels_keep_vertex_ais_rules_for_any_name(dataset, request):
    labels = vertex.labels_for(jobmeta.job_name(dataset, request), dataset, request)
    assert len(labels) <= vertex.LABEL_RULES["max_labels"]
    for key, value in labels.items():
        assert re.fullmatch(vertex.LABEL_RULES["key"], key), key
        assert re.fullmatch(vertex.LABEL_RULES["value"], value), value


def test_tf_config_as_vertex_sets_it_is_what_the_trainer_reads():
    addresses = [["chief-0:2222"], ["worker-0:2222", "worker-1:2222"]]
    seen = [Cluster.from_env({"TF_CONFIG": vertex.tf_config(addresses, pool, index)})
            for pool, index in ((0, 0), (1, 0), (1, 1))]
    assert [(c.num_workers, c.worker_index, c.is_chief) for c in seen] == [(3, 0, True), (3, 1, False),
                                                                            (3, 2, False)]


def test_the_deployed_set_carries_the_client():
    """The submit function and the reconcile job create CustomJobs, so Google's client is a base dependency (what
    functions/requirements.txt and every image install), not an extra the deploy would miss."""
    import tomllib
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    base = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in base if d.startswith("google-cloud-aiplatform")]
    assert pin in (repo / "functions" / "requirements.txt").read_text().splitlines()
    assert "--no-deps 'google-cloud-aiplatform" not in (repo / "Makefile").read_text()
