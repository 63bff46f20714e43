"""Only incoming/ starts work (issue #10): the data bucket's Cloud Storage notification (JSON_API_V1, objects
under ``incoming/`` only, finalized/deleted/archived) feeds a topic that on-data-arrival's own push
subscription reads, with a dead-letter topic and retry backoff; no function has a storage trigger, so the
system's own writes (tfrecords/, tmp/, rejected/, runs/) start nothing; the grants that route needs are
narrow (the storage agent publishes to that one topic) and the Eventarc ones are gone."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from .tools import INFRA, blocks, first, labelled, load_hcl, unquote

MODULES = INFRA / "modules"
PUBSUB = MODULES / "pubsub"
FUNCTIONS = MODULES / "functions"
IAM = MODULES / "iam"
PLATFORM = MODULES / "platform"
ENVS = sorted(p for p in (INFRA / "envs").iterdir() if p.is_dir())
ARRIVAL_EVENTS = {"OBJECT_FINALIZE", "OBJECT_DELETE", "OBJECT_ARCHIVE"}
SYSTEM_PREFIXES = ("runs/", "tfrecords/", "tmp/", "rejected/")  # what the system writes itself
ARRIVAL_URI = "google_cloudfunctions2_function.on_data_arrival.service_config[0].uri"
STORAGE_AGENT = "data.google_storage_project_service_account."


def resources(path: Path, rtype: str) -> dict[str, dict[str, Any]]:
    """``resource "<rtype>" "<name>"`` blocks of every .tf file in one module folder, as ``{name: body}``."""
    out: dict[str, dict[str, Any]] = {}
    for tf in sorted(path.glob("*.tf")):
        for block in blocks(load_hcl(tf), "resource"):
            for kind, named in block.items():
                if kind.strip('"') == rtype:
                    out |= {name.strip('"'): body for name, body in named.items()}
    return out


def all_resources(rtype: str) -> dict[str, dict[str, Any]]:
    """Every ``<rtype>`` resource under infra/, keyed ``<module folder>/<name>``."""
    out: dict[str, dict[str, Any]] = {}
    for folder in sorted({p.parent for p in INFRA.rglob("*.tf") if ".terraform" not in p.parts}):
        out |= {f"{folder.relative_to(INFRA)}/{k}": v for k, v in resources(folder, rtype).items()}
    return out


def attr(body: dict[str, Any], *path: str) -> Any:
    """A (nested block's) attribute, unwrapped and unquoted: ``attr(sub, "push_config", "oidc_token", "audience")``."""
    value: Any = body
    for key in path:
        assert isinstance(value, dict) and key in value, f"no {key} in {value}"
        value = first(value[key])
    return unquote(value)


def items(value: Any) -> list[Any]:
    """A list attribute (older python-hcl2 wraps it in one more list), items unquoted."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    assert isinstance(value, list), value
    return [unquote(v) for v in value]


def expr(value: Any) -> str:
    """The expression inside ``${...}`` (a reference), else the literal as text."""
    text = unquote(value)
    assert isinstance(text, str), value
    m = re.fullmatch(r"\$\{(.*)\}", text, re.S)
    return m.group(1).strip() if m else text


def outputs(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tf in sorted(path.glob("*.tf")):
        out |= labelled(load_hcl(tf), "output")
    return out


def module_calls(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tf in sorted(path.glob("*.tf")):
        out |= labelled(load_hcl(tf), "module")
    return out


def platform_output_source(env: Path, name: str) -> str:
    """Follow a platform output of an environment down to the pubsub module's resource it comes from:
    envs/<env>/platform output -> modules/platform output -> modules/pubsub output -> resource expression."""
    root = expr(outputs(env / "platform")[name]["value"])
    assert root.startswith("module.platform."), f"{env.name}: output {name} = {root}"
    composed = expr(outputs(PLATFORM)[root.removeprefix("module.platform.")]["value"])
    assert composed.startswith("module.pubsub."), f"modules/platform: output {root} = {composed}"
    return expr(outputs(PUBSUB)[composed.removeprefix("module.pubsub.")]["value"])


def functions_input_source(env: Path, variable: str) -> str:
    """What an environment's functions root passes to modules/functions' ``variable``, traced to the resource."""
    given = expr(module_calls(env / "functions")["functions"][variable])
    assert given.startswith("local.platform."), f"{env.name}/functions: {variable} = {given}"
    return platform_output_source(env, given.removeprefix("local.platform."))


def arrival_subscription() -> dict[str, Any]:
    subs = {
        name: body
        for name, body in resources(FUNCTIONS, "google_pubsub_subscription").items()
        if ARRIVAL_URI in expr(attr(body, "push_config", "push_endpoint"))
    }
    assert len(subs) == 1, f"expected one push subscription to on-data-arrival, found {sorted(subs)}"
    return next(iter(subs.values()))


def notification() -> dict[str, Any]:
    found = all_resources("google_storage_notification")
    assert list(found) == ["modules/pubsub/arrivals"], f"expected the one arrival notification, found {sorted(found)}"
    return found["modules/pubsub/arrivals"]


# --- (a) the notification --------------------------------------------------------------------------------
def test_notification_covers_incoming_only_in_json() -> None:
    note = notification()
    assert attr(note, "object_name_prefix") == "incoming/"
    assert attr(note, "payload_format") == "JSON_API_V1"
    assert set(items(note["event_types"])) >= ARRIVAL_EVENTS, note["event_types"]
    assert expr(attr(note, "bucket")) == "var.bucket_name"
    # modules/platform gives it the data bucket, the one the functions convert from.
    pubsub_call = module_calls(PLATFORM)["pubsub"]
    assert expr(pubsub_call["bucket_name"]) == "module.storage.bucket_name"


def test_notification_publishes_to_the_topic_the_arrival_subscription_reads() -> None:
    topic = expr(attr(notification(), "topic"))
    assert re.fullmatch(r"google_pubsub_topic\.\w+\.id", topic), topic
    assert topic.split(".")[1] in resources(PUBSUB, "google_pubsub_topic")
    assert expr(attr(arrival_subscription(), "topic")) == "var.notification_topic_id"
    assert ENVS
    for env in ENVS:
        assert functions_input_source(env, "notification_topic_id") == topic, env.name


def test_notification_topic_name_matches_the_local_stack() -> None:
    from landfall.local.stack import StackConfig

    variables = labelled(load_hcl(PUBSUB / "variables.tf"), "variable")
    assert unquote(variables["notification_topic_name"]["default"]) == StackConfig().notification_topic
    notifications = resources(PUBSUB, "google_pubsub_topic")["notifications"]
    assert expr(attr(notifications, "name")) == "var.notification_topic_name"


# --- (b) nothing else starts a function -------------------------------------------------------------------
def test_no_function_has_a_storage_trigger() -> None:
    functions = all_resources("google_cloudfunctions2_function")
    assert {k.rsplit("/", 1)[1] for k in functions} == {"on_data_arrival", "on_training_request"}
    for name, body in functions.items():
        assert "event_trigger" not in body, f"{name} has an event trigger: {body['event_trigger']}"
    assert not all_resources("google_eventarc_trigger")
    assert not all_resources("google_cloudfunctions_function")  # no gen1 bucket triggers either


def test_only_incoming_prefix_is_notified() -> None:
    from landfall.core.contracts.layout import Layout

    prefix = attr(notification(), "object_name_prefix")
    layout = Layout()
    assert prefix == layout.incoming_prefix
    written = set(SYSTEM_PREFIXES) | {
        getattr(layout, f.name) for f in dataclasses.fields(layout) if f.name.endswith("_prefix")
    }
    written.discard(layout.incoming_prefix)
    assert written >= set(SYSTEM_PREFIXES)
    for other in sorted(written):
        assert not other.startswith(prefix), f"writes to {other} would start on-data-arrival"
        assert not prefix.startswith(other), f"{prefix} lies under {other}"


# --- (c) the arrival push subscription --------------------------------------------------------------------
def test_arrival_subscription_retries_dead_letters_and_pushes_with_oidc() -> None:
    sub = arrival_subscription()
    assert expr(attr(sub, "push_config", "push_endpoint")) == ARRIVAL_URI
    assert expr(attr(sub, "push_config", "oidc_token", "audience")) == ARRIVAL_URI
    assert expr(attr(sub, "push_config", "oidc_token", "service_account_email")) == "var.service_accounts.invoker"

    assert attr(sub, "retry_policy", "minimum_backoff") and attr(sub, "retry_policy", "maximum_backoff")
    assert expr(attr(sub, "dead_letter_policy", "max_delivery_attempts")) == "var.max_delivery_attempts"
    assert expr(attr(sub, "dead_letter_policy", "dead_letter_topic")) == "var.arrival_dead_letter_topic_id"
    assert attr(sub, "expiration_policy", "ttl") == ""
    assert attr(sub, "message_retention_duration")

    # The ack deadline is the converter's timeout, within what Pub/Sub accepts.
    assert expr(attr(sub, "ack_deadline_seconds")) == "var.converter.timeout_seconds"
    variables = labelled(load_hcl(FUNCTIONS / "variables.tf"), "variable")
    timeout = first(variables["converter"]["default"])["timeout_seconds"]
    assert 10 <= int(unquote(timeout)) <= 600


def test_arrival_dead_letters_are_kept_and_publishable() -> None:
    notifications = expr(attr(notification(), "topic"))
    topics = resources(PUBSUB, "google_pubsub_topic")
    for env in ENVS:
        dead = functions_input_source(env, "arrival_dead_letter_topic_id")
        assert dead != notifications and dead != functions_input_source(env, "dead_letter_topic_id"), env.name
    assert re.fullmatch(r"google_pubsub_topic\.\w+\.id", dead), dead
    name = dead.split(".")[1]
    assert name in topics
    # A pull subscription keeps what lands there (no push_config) ...
    keepers = [
        s
        for s in resources(PUBSUB, "google_pubsub_subscription").values()
        if expr(attr(s, "topic")) == dead and "push_config" not in s
    ]
    assert len(keepers) == 1, keepers
    # ... and the Pub/Sub service agent may publish to it (it does the dead-lettering).
    publishers = [
        m
        for m in resources(PUBSUB, "google_pubsub_topic_iam_member").values()
        if expr(attr(m, "topic")) == f"google_pubsub_topic.{name}.name"
    ]
    assert [(attr(m, "role"), expr(attr(m, "member"))) for m in publishers] == [
        ("roles/pubsub.publisher", "local.pubsub_service_agent")
    ]
    variables = labelled(load_hcl(PUBSUB / "variables.tf"), "variable")
    assert unquote(variables["arrival_dead_letter_topic_name"]["default"]) == "landfall-gcs-notifications-dead-letter"


def test_invoker_may_call_the_arrival_function_and_nothing_from_eventarc() -> None:
    names = {expr(attr(body, "name")) for body in resources(FUNCTIONS, "google_cloudfunctions2_function").values()}
    # The invoker's roles/run.invoker is bound on each function's own service, for exactly these functions.
    invoker = resources(FUNCTIONS, "google_cloud_run_v2_service_iam_member")["invoker"]
    assert expr(attr(invoker, "for_each")) == "local.functions"
    assert expr(attr(invoker, "name")) == "each.value.service_config[0].service"
    fn_locals = blocks(load_hcl(FUNCTIONS / "main.tf"), "locals")
    functions_local = next(b["functions"] for b in fn_locals if "functions" in b)
    assert set(functions_local) == names == {"on-data-arrival", "on-training-request"}
    assert {expr(v) for v in functions_local.values()} == {
        f"google_cloudfunctions2_function.{r}" for r in resources(FUNCTIONS, "google_cloudfunctions2_function")}
    # No role, API (google_project_service) or other attribute anywhere in infra/ names Eventarc.
    values = [v for tf in sorted(INFRA.rglob("*.tf")) if ".terraform" not in tf.parts for v in _values(load_hcl(tf))]
    assert values
    assert not [v for v in values if "roles/eventarc." in v]
    assert not [v for v in values if "eventarc.googleapis.com" in v]
    assert not all_resources("google_eventarc_trigger")


def _values(node: Any) -> list[str]:
    """Every key and string value of a parsed .tf file (attribute values, block labels, expressions)."""
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in [str(k), *_values(v)]]
    if isinstance(node, list):
        return [s for v in node for s in _values(v)]
    return [str(node)]


# --- (d) the storage agent's grant ------------------------------------------------------------------------
def test_storage_agent_publishes_to_the_notification_topic_only() -> None:
    note = notification()
    topic = expr(attr(note, "topic"))  # google_pubsub_topic.<name>.id
    grants = {
        name: body
        for name, body in resources(PUBSUB, "google_pubsub_topic_iam_member").items()
        if STORAGE_AGENT in expr(attr(body, "member"))
    }
    assert len(grants) == 1, grants
    ((name, grant),) = grants.items()
    assert attr(grant, "role") == "roles/pubsub.publisher"
    assert expr(attr(grant, "topic")) == topic.removesuffix(".id") + ".name"
    depends = [expr(d) for d in items(note.get("depends_on", []))]
    assert f"google_pubsub_topic_iam_member.{name}" in depends
    # No project-wide (or other) grant names the storage agent anywhere.
    for rtype in ("google_project_iam_member", "google_project_iam_binding", "google_storage_bucket_iam_member"):
        for key, body in all_resources(rtype).items():
            members = [str(v) for k, v in body.items() if k in ("member", "members")]
            assert not any(STORAGE_AGENT in m for m in members), f"{rtype} {key} grants the storage agent"
