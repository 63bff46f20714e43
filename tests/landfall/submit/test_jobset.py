"""The JobSet engine against JobSet's and Kubernetes' published rules (encoded below as data, with their source),
not against what ``landfall.submit.jobset`` already believes: the rendered object validates against the JobSet
CRD (tests/infra/crds/jobset), obeys the rules of JobSet's admission webhook and of the Job API that the CRD
cannot express, carries the TFJob's container, labels and annotations, and the trainer's ``TF_CONFIG`` builder
names the hosts as JobSet names its pods. The fake API server serves ``jobsets`` with the TFJob's limits."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from landfall.core.errors import AlreadyExists, Invalid, NotFound
from landfall.submit import engine, jobmeta, jobset, tfjob
from landfall.submit.backends.kubernetes import KubeBackend
from landfall.submit.config import JobConfig
from tests.fakes.kube_api import JOBSETS, FakeKubeAPI
from trainer.training.cluster import Cluster, jobset_tf_config

CRD = Path(__file__).resolve().parents[2] / "infra" / "crds" / "jobset" / "jobset.x-k8s.io_jobsets.yaml"

# --- the platform's rules, as published ------------------------------------------------------------------
# https://jobset.sigs.k8s.io/docs/concepts/ and the CRD's field docs (network.enableDNSHostnames, subdomain),
# kubernetes-sigs/jobset main, read 2026-12-01.
JOBSET_DOCS = {
    "source": "https://jobset.sigs.k8s.io/docs/concepts/; CRD jobset.x-k8s.io_jobsets.yaml (v0.12.0)",
    "read": "2026-12-01",
    # "Pods will be reachable using the fully qualified pod hostname:
    #  <jobSet.name>-<spec.replicatedJob.name>-<job-index>-<pod-index>.<subdomain>"
    "hostname": "{jobset}-{replicated_job}-{job_index}-{pod_index}.{subdomain}",
    # "subdomain ... Defaults to <jobSet.name> if not set."
    "default_subdomain": "{jobset}",
    # labels the controller sets on every Job and pod it creates
    "labels": {"jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
               "jobset.sigs.k8s.io/job-index", "jobset.sigs.k8s.io/restart-attempt"},
    # failurePolicy: "If no matching rule is found, the RestartJobSet action is applied."
    "default_action": "RestartJobSet",
}
# kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go (main, read 2026-12-01): ValidateCreate.
WEBHOOK = {
    "source": "https://github.com/kubernetes-sigs/jobset/blob/main/pkg/webhooks/jobset_webhook.go",
    "read": "2026-12-01",
    "valid_on_job_failure_reasons": {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes",
                                     "MaxFailedIndexesExceeded", "PodFailurePolicy"},
    # the longest pod name, <jobset>-<rjob>-<maxJobIndex>-<maxPodIndex>-abcde, is a DNS-1035 label
    "longest_pod_name": "{jobset}-{replicated_job}-{max_job_index}-{max_pod_index}-abcde",
    "rule_name": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
}
# https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/ (PodFailurePolicy), read
# 2026-12-01: onExitCodes.values "must be unique, ordered, at most 255 elements; the value 0 cannot be used
# for the In operator"; "podFailurePolicy ... restartPolicy must be Never"; backoffLimit counts failed pods.
JOB_API = {
    "source": "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/",
    "read": "2026-12-01",
    "max_exit_code_values": 255,
    "pod_failure_policy_restart_policy": "Never",
    "failure_reason_of_fail_job": "PodFailurePolicy",
}
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
TRAINER_PERMANENT = range(1, 128)  # trainer.errors: exit 1-127 permanent, 128 and up retryable


def cfg(**kw) -> JobConfig:
    return JobConfig.load({}, bucket="bkt", project="p", engine="jobset", trainer_image="trainer:test",
                          queue_name="landfall-gpu", **kw)


def render(c: JobConfig | None = None, name: str = "ds-0123456789") -> dict:
    return engine.render(c or cfg(), name=name, dataset="ds", request_id="req-1",
                         inputs_uri=f"gs://bkt/runs/{name}/inputs.json", after="ds-prev", released_at="t")


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    from tests.infra.tools import strict

    crd = yaml.load(CRD.read_text(), Loader=yaml.CSafeLoader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    assert version["served"] and version["storage"]
    schema = strict(version["schema"]["openAPIV3Schema"])
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema)


def errors(v: jsonschema.protocols.Validator, obj: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]


def webhook_errors(js: dict) -> list[str]:
    """What JobSet's webhook and the Job API refuse that the CRD's schema cannot say (WEBHOOK, JOB_API)."""
    out = []
    names = {r["name"] for r in js["spec"]["replicatedJobs"]}
    for rule in js["spec"].get("failurePolicy", {}).get("rules", []):
        if not re.match(WEBHOOK["rule_name"], rule["name"]):
            out.append(f"rule name {rule['name']!r}")
        out += [f"reason {r}" for r in rule.get("onJobFailureReasons", [])
                if r not in WEBHOOK["valid_on_job_failure_reasons"]]
        out += [f"target {t}" for t in rule.get("targetReplicatedJobs", []) if t not in names]
    out += [f"success target {t}" for t in js["spec"].get("successPolicy", {}).get("targetReplicatedJobs", [])
            if t not in names]
    for rj in js["spec"]["replicatedJobs"]:
        spec = rj["template"]["spec"]
        longest = WEBHOOK["longest_pod_name"].format(jobset=js["metadata"]["name"], replicated_job=rj["name"],
                                                     max_job_index=rj["replicas"] - 1,
                                                     max_pod_index=spec["completions"] - 1)
        if len(longest) > 63 or not DNS1035.match(longest):
            out.append(f"pod name {longest}")
        for rule in (spec.get("podFailurePolicy") or {}).get("rules", []):
            values = rule.get("onExitCodes", {}).get("values", [])
            if len(values) > JOB_API["max_exit_code_values"] or values != sorted(set(values)):
                out.append("onExitCodes.values must be unique, ordered, at most 255")
            if rule.get("onExitCodes", {}).get("operator") == "In" and 0 in values:
                out.append("onExitCodes: 0 with In")
            if spec["template"]["spec"].get("restartPolicy") != JOB_API["pod_failure_policy_restart_policy"]:
                out.append("podFailurePolicy needs restartPolicy Never")
    return out


# --- the object ------------------------------------------------------------------------------------------
def test_the_rendered_jobset_validates_against_the_crd_and_the_webhook(validator) -> None:
    for c in (cfg(), cfg(gpus_per_worker=0, workers=1), cfg(workers=8, backoff_limit=0)):
        js = render(c)
        assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["kind"] == "JobSet"
        assert errors(validator, js) == []
        assert webhook_errors(js) == []


def test_the_checks_catch_mistakes(validator) -> None:
    js = render()
    bad = copy.deepcopy(js)
    bad["spec"]["failurePolicy"]["rules"][0]["action"] = "FailJob"  # a Job action, not a JobSet one
    assert errors(validator, bad)
    bad = copy.deepcopy(js)
    bad["spec"]["network"]["enableDnsHostnames"] = True  # misspelt
    assert errors(validator, bad)
    bad = copy.deepcopy(js)
    bad["spec"]["failurePolicy"]["rules"][0]["onJobFailureReasons"] = ["PodFailure"]
    assert webhook_errors(bad)
    bad = copy.deepcopy(js)
    bad["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] = (
        list(range(0, 128)))
    assert webhook_errors(bad)
    bad = copy.deepcopy(js)
    bad["metadata"]["name"] = "d" * 47
    assert webhook_errors(bad)


def test_same_workers_labels_and_annotations_as_the_tfjob() -> None:
    js = render()
    twin = tfjob.render(cfg(), name="ds-0123456789", dataset="ds", request_id="req-1",
                        inputs_uri="gs://bkt/runs/ds-0123456789/inputs.json", after="ds-prev", released_at="t")
    assert js["metadata"] == twin["metadata"] and js["metadata"]["labels"][jobmeta.QUEUE_LABEL] == "landfall-gpu"
    (rj,) = js["spec"]["replicatedJobs"]
    assert rj["name"] == jobset.REPLICATED_JOB == "worker" and rj["replicas"] == 1
    spec = rj["template"]["spec"]
    workers = twin["spec"]["tfReplicaSpecs"]["Worker"]
    assert spec["completions"] == spec["parallelism"] == workers["replicas"] == 2
    assert spec["completionMode"] == "Indexed" and spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == twin["spec"]["runPolicy"]["activeDeadlineSeconds"]
    assert js["spec"]["ttlSecondsAfterFinished"] == twin["spec"]["runPolicy"]["ttlSecondsAfterFinished"]
    pod, tf_pod = spec["template"]["spec"], workers["template"]["spec"]
    for key in ("serviceAccountName", "nodeSelector", "tolerations"):
        assert pod[key] == tf_pod[key], key
    (c,), (tc,) = pod["containers"], tf_pod["containers"]
    for key in ("name", "image", "command", "args", "resources"):
        assert c[key] == tc[key], key
    assert tc["env"] == c["env"][: len(tc["env"])]
    # Kueue queues the JobSet as a whole: neither its Jobs nor its pods carry the queue label (Kueue's default
    # Configuration enables the "pod" integration, which would queue each labelled pod on its own).
    assert jobmeta.QUEUE_LABEL not in spec["template"]["metadata"]["labels"]
    assert jobmeta.QUEUE_LABEL not in rj["template"].get("metadata", {}).get("labels", {})
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "ds-0123456789"}
    assert js["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["worker"]}


def test_the_failure_policy_is_the_trainers_exit_code_contract() -> None:
    """Exit 1-127 fails the JobSet without a restart; 128 and up or a kill restarts all, maxRestarts times."""
    js = render(cfg(backoff_limit=4))
    spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["containerName"] == jobmeta.CONTAINER
    assert rule["onExitCodes"]["operator"] == "In" and set(rule["onExitCodes"]["values"]) == set(TRAINER_PERMANENT)
    policy = js["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 4
    (fail,) = policy["rules"]
    assert fail["action"] == "FailJobSet"
    assert JOB_API["failure_reason_of_fail_job"] in fail["onJobFailureReasons"]
    assert "BackoffLimitExceeded" not in fail["onJobFailureReasons"]  # a retryable exit: JobSet's default action
    assert JOBSET_DOCS["default_action"] == "RestartJobSet"


def test_long_names_are_refused_before_the_webhook_would() -> None:
    long = jobmeta.job_name("d" * 60, "seq:1")
    assert len(long) == jobmeta.MAX_NAME
    with pytest.raises(Invalid, match="longer than 63"):
        render(name=long)
    render(cfg(workers=10), name=jobmeta.job_name("d" * 35, "seq:1"))  # 46 characters: fits up to 10 workers
    with pytest.raises(Invalid):
        render(cfg(workers=11), name=jobmeta.job_name("d" * 35, "seq:1"))


def test_engine_reads_state_by_kind() -> None:
    js = render()
    assert engine.of(js) is jobset and engine.state(js) == "Pending" and not engine.is_finished(js)
    js["status"] = {"replicatedJobsStatus": [{"name": "worker", "active": 1, "ready": 1}]}
    assert engine.state(js) == "Running"
    js["spec"]["suspend"] = True
    assert engine.state(js) == "Suspended"
    js["status"]["conditions"] = [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]
    assert engine.state(js) == "Succeeded" and engine.is_finished(js)
    assert engine.bucket_of(js) == "bkt"
    with pytest.raises(ValueError):
        JobConfig.load({"LANDFALL_ENGINE": "mpijob"})


# --- TF_CONFIG -------------------------------------------------------------------------------------------
def pod_env(js: dict, index: int) -> dict[str, str]:
    """The env a pod of ``js`` gets: the container's, the downward API's labels, JOB_COMPLETION_INDEX."""
    from landfall.local.jobset_controller import pod_env as resolve

    name = js["metadata"]["name"]
    labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "worker",
              "jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/restart-attempt": "0"}
    assert set(labels) == JOBSET_DOCS["labels"]
    (c,) = jobset.containers_of(js)
    return {**resolve(c, labels), "JOB_COMPLETION_INDEX": str(index)}


def test_tf_config_names_the_hosts_as_jobset_names_its_pods() -> None:
    js = render(cfg(workers=3))
    name = js["metadata"]["name"]
    subdomain = js["spec"]["network"].get("subdomain") or JOBSET_DOCS["default_subdomain"].format(jobset=name)
    want = [JOBSET_DOCS["hostname"].format(jobset=name, replicated_job="worker", job_index=0, pod_index=i,
                                           subdomain=subdomain) + f":{jobset.TF_PORT}" for i in range(3)]
    for i in range(3):
        tf = json.loads(jobset_tf_config(pod_env(js, i)))
        assert tf["cluster"] == {"worker": want} and tf["task"] == {"type": "worker", "index": i}
        cluster = Cluster.from_env(pod_env(js, i))
        assert (cluster.num_workers, cluster.worker_index, cluster.is_chief) == (3, i, i == 0)
        assert json.loads(cluster.built_tf_config) == tf


def test_a_given_tf_config_wins_and_bad_inputs_are_invalid() -> None:
    js = render()
    given = json.dumps({"cluster": {"worker": ["a:1", "b:1", "c:1"]}, "task": {"type": "worker", "index": 2}})
    cluster = Cluster.from_env({**pod_env(js, 0), "TF_CONFIG": given})
    assert (cluster.num_workers, cluster.worker_index, cluster.built_tf_config) == (3, 2, "")
    assert Cluster.from_env({}) == Cluster()  # no JobSet, no TF_CONFIG: a cluster of one
    for broken in ({"JOB_COMPLETION_INDEX": "2"}, {"JOB_COMPLETION_INDEX": "x"}, {"LANDFALL_WORKERS": ""},
                   {"LANDFALL_JOB_INDEX": "1"}, {"LANDFALL_TF_ADDRESSES": '{"elsewhere": "127.0.0.1:1"}'}):
        with pytest.raises(Invalid):
            Cluster.from_env({**pod_env(js, 0), **broken})


# --- the fake API server ---------------------------------------------------------------------------------
def test_the_fake_api_server_serves_jobsets_with_the_same_limits() -> None:
    with FakeKubeAPI() as api:
        backend = KubeBackend.for_host(api.host, engine_name="jobset")
        created = backend.create(render())
        assert created["metadata"]["uid"] and api.names(res=JOBSETS) == ["ds-0123456789"] and api.names() == []
        with pytest.raises(AlreadyExists):
            backend.create(render())
        assert [jobmeta.name_of(j) for j in backend.list("ds")] == ["ds-0123456789"]
        assert backend.list("other") == []
        with pytest.raises(NotFound):
            KubeBackend.for_host(api.host).get("ds-0123456789")  # not a TFJob
        bad = render(name="ds-1")
        bad["spec"]["failurePolicy"]["rules"][0]["action"] = "Explode"
        with pytest.raises(Invalid, match=re.escape('JobSet.jobset.x-k8s.io "ds-1" is invalid')):
            backend.create(bad)
        huge = render(name="ds-2")
        huge["metadata"]["annotations"]["landfall.dev/x"] = "x" * (256 * 1024)
        with pytest.raises(Invalid, match="Too long"):
            backend.create(huge)
        backend.delete("ds-0123456789")
        with pytest.raises(NotFound):
            backend.get("ds-0123456789")


def test_render_job_prints_either_engine_and_render_tfjob_still_works(capsys) -> None:
    from landfall import cli

    manifest = "gs://bkt/tfrecords/ds/a1/manifest.json"
    assert cli.main(["render-job", "--engine", "jobset", "--offline", "--manifest", manifest, "--workers", "3"]) == 0
    js = yaml.safe_load(capsys.readouterr().out)
    assert js["kind"] == "JobSet" and js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 3
    assert cli.main(["render-tfjob", "--offline", "--manifest", manifest]) == 0
    tf = yaml.safe_load(capsys.readouterr().out)
    assert tf["kind"] == "TFJob" and tf["metadata"]["name"] == js["metadata"]["name"]  # one naming rule
