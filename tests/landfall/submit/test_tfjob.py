"""Rendering the TFJob: names, labels, the Worker spec, the run policy, release patches, state."""

from __future__ import annotations

import json
import re

import pytest

from landfall.submit import jobmeta, tfjob
from landfall.submit.config import JobConfig


def cfg(**kw) -> JobConfig:
    return JobConfig.load({}, bucket="bkt", project="p", **kw)


def test_names_are_deterministic_dns1035_and_short_enough_for_pod_names():
    long = "A" * 30 + "_weird.Name-" + "9" * 30
    for dataset in ("sensors", long, "9starts-with-digit", "x"):
        for key in ("r1", "r2", "a" * 200):
            name = jobmeta.job_name(dataset, key)
            assert name == jobmeta.job_name(dataset, key)
            assert re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name), name
            assert len(f"{name}-worker-9999") <= 63
    assert jobmeta.job_name("sensors", "r1") != jobmeta.job_name("sensors", "r2")
    assert jobmeta.job_name("sensors", "r1") != jobmeta.job_name("Sensors", "r1")


def test_render_has_every_field_the_issue_asks_for():
    c = cfg(workers=3, gpus_per_worker=2, trainer_image="img:1", trainer_args=("--units", "16,8"))
    job = tfjob.render(c, name="sensors-abc", dataset="sensors", request_id="rid1",
                       inputs_uri="gs://bkt/runs/sensors-abc/inputs.json")
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "TFJob"
    meta = job["metadata"]
    assert meta["namespace"] == "landfall-training"
    assert meta["labels"]["app.kubernetes.io/name"] == "landfall"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "landfall"
    assert meta["labels"]["landfall.dev/dataset"] == "sensors"
    assert meta["labels"]["landfall.dev/request-id"] == "rid1"
    assert meta["annotations"]["landfall.dev/inputs"] == "gs://bkt/runs/sensors-abc/inputs.json"
    assert jobmeta.QUEUE_LABEL not in meta["labels"]
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3 and worker["restartPolicy"] == "ExitCode"
    pod = worker["template"]["spec"]
    assert pod["serviceAccountName"] == "landfall-trainer"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    (container,) = pod["containers"]
    assert container["name"] == "tensorflow" and container["image"] == "img:1"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 2}
    args = container["args"]
    assert args[:2] == ["--inputs", "gs://bkt/runs/sensors-abc/inputs.json"] and "--manifest" not in args
    assert args[args.index("--job-dir") + 1] == "gs://bkt/runs/sensors-abc"
    assert args[-2:] == ["--units", "16,8"]
    run = job["spec"]["runPolicy"]
    assert run == {"cleanPodPolicy": "Running", "backoffLimit": 3, "activeDeadlineSeconds": 21600,
                   "ttlSecondsAfterFinished": 7 * 86400 + 3600}  # no suspend: Kueue owns it


def test_cpu_only_has_no_gpu_limits_selector_or_toleration():
    job = tfjob.render(cfg(gpus_per_worker=0), name="a-b", dataset="a", request_id="r", inputs_uri="gs://b/i.json")
    pod = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert "limits" not in pod["containers"][0]["resources"]
    assert "nodeSelector" not in pod and "tolerations" not in pod


def test_config_from_env_and_validation():
    env = {"LANDFALL_WORKERS": "4", "LANDFALL_CONCURRENCY": "forbid", "LANDFALL_TRAINER_ARGS": "--units,8"}
    c = JobConfig.load(env)
    assert (c.workers, c.concurrency, c.trainer_args) == (4, "forbid", ("--units", "8"))
    with pytest.raises(ValueError):
        JobConfig.load({"LANDFALL_CONCURRENCY": "sometimes"})
    with pytest.raises(ValueError):
        JobConfig.load({}, backend="nomad")


def test_a_queue_name_labels_the_job_for_kueue_and_the_size_is_flat():
    job = tfjob.render(cfg(queue_name="landfall-gpu"), name="a-b", dataset="a", request_id="r",
                       inputs_uri="gs://b/runs/a-b/inputs.json")
    assert job["metadata"]["labels"][jobmeta.QUEUE_LABEL] == "landfall-gpu"
    # Kueue v0.19's default Configuration enables the "pod" integration (tests/infra/crds/kueue): a labelled pod
    # would be queued on its own, so only the job carries the label.
    assert jobmeta.QUEUE_LABEL not in job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    assert "suspend" not in job["spec"]["runPolicy"]
    assert len(json.dumps(job)) < 4096  # whatever the job covers: its inputs live in the bucket
    with pytest.raises(ValueError, match="queue_name"):
        cfg(queue_name="not a queue")


def test_state_from_conditions():
    job = tfjob.render(cfg(), name="a-b", dataset="a", request_id="r", inputs_uri="gs://b/i.json")
    job["spec"]["runPolicy"]["suspend"] = True  # Kueue has not admitted it
    assert tfjob.state(job) == "Suspended" and not tfjob.is_finished(job)
    job["spec"]["runPolicy"]["suspend"] = False
    assert tfjob.state(job) == "Pending"
    job["status"] = {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}
    assert tfjob.state(job) == "Running" and not tfjob.is_finished(job)
    job["status"]["conditions"] += [{"type": "Restarting", "status": "True"}]
    assert tfjob.state(job) == "Restarting"
    job["status"]["conditions"] += [{"type": "Succeeded", "status": "True"}]
    assert tfjob.state(job) == "Succeeded" and tfjob.is_finished(job)


def test_yaml_round_trips():
    import yaml

    job = tfjob.render(cfg(), name="a-b", dataset="a", request_id="r", inputs_uri="gs://b/i.json")
    assert yaml.safe_load(jobmeta.to_yaml(job)) == job
