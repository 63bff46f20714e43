"""Detections on arrival, deploy side (issue #40): the Cloud Run service landfall-scorer and its push subscriptions
(infra/modules/scorer), over the parsed Terraform. The service runs the scorer image as its own account, sized and
bounded as decided (2 vCPU, 4 GiB, 4 requests per instance, at most max_instances, none when idle, 900 s, internal
ingress, no unauthenticated access) with the environment the scorer reads; both subscriptions push to it with an OIDC
token of its own push identity, back off and dead-letter to landfall-scorer-dead-letter, whose subscription the
dead-letter alert watches; both env roots wire the module with the image Cloud Build pushes. Who may do what is
tests/infra/test_authorization.py."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

from .test_terraform import load_module
from .tools import INFRA, blocks, expr_text, first, labelled, load_hcl, unquote

SCORER = INFRA / "modules" / "scorer"
PUBSUB = INFRA / "modules" / "pubsub"


def _resources(path, kind: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for block in blocks(load_hcl(path), "resource"):
        for k, named in block.items():
            if k.strip('"') == kind:
                out |= {n.strip('"'): body for n, body in named.items()}
    return out


def _default(module, name: str) -> Any:
    return unquote(load_module(module).variables[name]["default"])


def test_the_service_runs_the_scorer_image_as_its_account_within_its_bounds() -> None:
    (service,) = _resources(SCORER / "main.tf", "google_cloud_run_v2_service").values()
    assert expr_text(service["name"]) == "${var.name}" and _default(SCORER, "name") == "landfall-scorer"
    assert unquote(service["ingress"]) == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    assert unquote(service["invoker_iam_disabled"]) is False
    template = first(service["template"])
    assert expr_text(template["service_account"]) == "${var.service_accounts.scorer}"
    assert expr_text(template["timeout"]) == "${var.timeout_seconds}s" and _default(SCORER, "timeout_seconds") == 900
    assert expr_text(template["max_instance_request_concurrency"]) == "${var.concurrency}"
    assert _default(SCORER, "concurrency") == 4
    scaling = first(template["scaling"])
    assert unquote(scaling["min_instance_count"]) == 0
    assert expr_text(scaling["max_instance_count"]) == "${var.max_instances}" and _default(SCORER, "max_instances") == 4
    container = first(template["containers"])
    assert expr_text(container["image"]) == "${var.scorer_image}"
    limits = first(first(container["resources"])["limits"])
    assert {k: expr_text(v) for k, v in limits.items()} == {"cpu": "${var.cpu}", "memory": "${var.memory}"}
    assert (_default(SCORER, "cpu"), _default(SCORER, "memory")) == ("2", "4Gi")


def test_the_service_environment_is_what_the_scorer_reads() -> None:
    env_locals = {k: v for b in blocks(load_hcl(SCORER / "main.tf"), "locals") for k, v in b.items()}
    env = {k: str(unquote(v)) for k, v in first(env_locals["scorer_env"]).items()}
    assert env == {"GOOGLE_CLOUD_PROJECT": "${var.project_id}", "LANDFALL_BUCKET": "${var.bucket_name}",
                   "LANDFALL_DETECTIONS_TOPIC": "${var.detections_topic_name}", "TF_USE_LEGACY_KERAS": "1"}
    assert _default(SCORER, "detections_topic_name") == "landfall-detections"
    # The platform's topic has that name, and the roots pass the platform's output.
    assert _default(PUBSUB, "detections_topic_name") == "landfall-detections"
    # Every LANDFALL_* variable is a field of what the scorer's runtime loads (Settings.load reads LANDFALL_<FIELD>).
    from landfall.core.config import ENV_PREFIX
    from landfall.core.contracts.layout import Layout
    from landfall.detect import handler
    from landfall.detect.config import DetectConfig

    source = inspect.getsource(handler.runtime_from_env)
    assert "DetectConfig.load()" in source and "Layout.load()" in source
    fields = {ENV_PREFIX + f.name.upper() for cls in (DetectConfig, Layout) for f in dataclasses.fields(cls)}
    assert {k for k in env if k.startswith(ENV_PREFIX)} <= fields, fields
    assert DetectConfig.__dataclass_fields__["detections_topic"].default == "landfall-detections"


def test_only_the_push_identity_invokes_it_and_the_build_only_updates_it() -> None:
    on_service = _resources(SCORER / "main.tf", "google_cloud_run_v2_service_iam_member")
    assert {n: (expr_text(b["role"]), expr_text(b["member"])) for n, b in on_service.items()} == {
        "scorer_invoker": ("roles/run.invoker", "serviceAccount:${var.service_accounts.scorer-invoker}"),
        "build_deploys_scorer": ("${var.deployer_roles.scorer_service}",
                                 "serviceAccount:${var.service_accounts.build}"),
    }
    for body in on_service.values():
        assert expr_text(body["name"]) == "${google_cloud_run_v2_service.scorer.name}" and "condition" not in body
    text = (SCORER / "main.tf").read_text()
    assert "allUsers" not in text and "allAuthenticatedUsers" not in text


def test_both_subscriptions_push_with_oidc_back_off_and_dead_letter() -> None:
    subs = _resources(SCORER / "main.tf", "google_pubsub_subscription")
    assert {n: (unquote(b["name"]), expr_text(b["topic"])) for n, b in subs.items()} == {
        "arrivals": ("landfall-scorer-arrivals", "${var.request_topic_id}"),
        "rescore": ("landfall-scorer-rescore", "${var.score_requests_topic_id}"),
    }
    assert _default(SCORER, "ack_deadline_seconds") == 600 and _default(SCORER, "max_delivery_attempts") == 5
    for name, body in subs.items():
        assert expr_text(body["ack_deadline_seconds"]) == "${var.ack_deadline_seconds}", name
        retry = first(body["retry_policy"])
        assert (unquote(retry["minimum_backoff"]), unquote(retry["maximum_backoff"])) == ("10s", "600s"), name
        dlq = first(body["dead_letter_policy"])
        assert expr_text(dlq["dead_letter_topic"]) == "${var.dead_letter_topic_id}", name
        assert expr_text(dlq["max_delivery_attempts"]) == "${var.max_delivery_attempts}", name
        push = first(body["push_config"])
        assert expr_text(push["push_endpoint"]) == "${google_cloud_run_v2_service.scorer.uri}", name
        assert "no_wrapper" not in push, name  # the raw envelope: functions-framework converts it
        oidc = first(push["oidc_token"])
        assert expr_text(oidc["service_account_email"]) == "${var.service_accounts.scorer-invoker}", name
        assert expr_text(oidc["audience"]) == "${google_cloud_run_v2_service.scorer.uri}", name


def test_the_platform_has_the_topics_and_pull_subscriptions() -> None:
    topics = _resources(PUBSUB / "main.tf", "google_pubsub_topic")
    subs = _resources(PUBSUB / "main.tf", "google_pubsub_subscription")
    names = {"detections": "landfall-detections", "score_requests": "landfall-score-requests",
             "scorer_dead_letter": "landfall-scorer-dead-letter"}
    for key, name in names.items():
        assert expr_text(topics[key]["name"]) == f"${{var.{key}_topic_name}}"
        assert _default(PUBSUB, f"{key}_topic_name") == name
    # Pull subscriptions named as their topics: the operators' detections and the scorer's dead letters.
    for key in ("detections", "scorer_dead_letter"):
        assert expr_text(subs[key]["name"]) == f"${{var.{key}_topic_name}}"
        assert expr_text(subs[key]["topic"]) == f"${{google_pubsub_topic.{key}.id}}"
        assert "push_config" not in subs[key]
    agent = _resources(PUBSUB / "main.tf", "google_pubsub_topic_iam_member")["scorer_dead_letter_publisher"]
    assert expr_text(agent["topic"]) == "${google_pubsub_topic.scorer_dead_letter.name}"
    platform = (INFRA / "modules" / "platform" / "main.tf").read_text()
    assert "module.pubsub.scorer_dead_letter_subscription_name," in platform  # the dead-letter alert watches it


def test_both_roots_wire_the_scorer_with_the_pushed_image() -> None:
    for env in ("dev", "prod"):
        root = labelled(load_hcl(INFRA / "envs" / env / "functions" / "main.tf"), "module")["scorer"]
        assert unquote(root["source"]) == "../../../modules/scorer"
        assert expr_text(root["scorer_image"]) == "${local.platform.scorer_image_base}:${var.scorer_image_tag}"
        assert expr_text(root["max_instances"]) == "${var.scorer_max_instances}"
        assert expr_text(root["dead_letter_topic_id"]) == "${local.platform.scorer_dead_letter_topic_id}"
        assert expr_text(root["score_requests_topic_id"]) == "${local.platform.score_requests_topic_id}"
        assert expr_text(root["request_topic_id"]) == "${local.platform.request_topic_id}"
        accounts = {k: expr_text(v) for k, v in root["service_accounts"].items()}
        assert accounts == {k: f'${{local.platform.service_accounts["{k}"]}}'
                            for k in ("scorer", "scorer-invoker", "build")}
        assert unquote(load_module(INFRA / "envs" / env / "functions").variables["scorer_max_instances"]
                       ["default"]) == 4
    registry = (INFRA / "modules" / "registry" / "outputs.tf").read_text()
    assert re.search(r'output "scorer_image_base".*?/scorer"', registry, re.S)
