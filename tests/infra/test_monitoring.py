"""infra/modules/monitoring against the log lines the code really writes.

Each log-based metric's filter (and the matched-log alert's) is evaluated against every JSON line of a small real
flow (``tests/flow.py``: the arrival and submit stages, the trainer, the reconciler's announcement and its loop),
turned into the LogEntry Cloud Logging makes of it. The evaluator covers the subset of the Logging query language
the module uses, as Google documents it (data below, with where and when it was read), not as the filters assume.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from .tools import INFRA, all_resources, blocks, first, load_hcl, unquote

MODULE = INFRA / "modules" / "monitoring"

# -- the platform's rules, as data ----------------------------------------------------------------------------
# https://cloud.google.com/logging/docs/view/logging-query-language (read 2026-12-01): a query is comparisons
# `FIELD OP VALUE` joined by AND / OR / NOT (upper case) and parentheses; `:` is "has" (substring), `:*` tests
# that the field is present; "string comparisons are not case sensitive"; severity compares in LogSeverity order.
QUERY_LANGUAGE_DOC = "https://cloud.google.com/logging/docs/view/logging-query-language"
CASE_INSENSITIVE = True
# https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#LogSeverity (read 2026-12-01)
SEVERITIES = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500,
              "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800}
# https://cloud.google.com/logging/docs/structured-logging#special-payload-fields (read 2026-12-01): a JSON line
# becomes jsonPayload, except these fields, which the agent (Cloud Run, GKE) moves into the LogEntry itself;
# `message` stays in jsonPayload (and is shown as the entry's text).
SPECIAL_FIELDS = {"severity": "severity", "time": "timestamp", "timestamp": "timestamp",
                  "logging.googleapis.com/labels": "labels", "logging.googleapis.com/trace": "trace",
                  "logging.googleapis.com/spanId": "spanId", "logging.googleapis.com/insertId": "insertId"}
# https://cloud.google.com/logging/docs/logs-based-metrics/labels (read 2026-12-01): EXTRACT(field) takes the field's
# value; REGEXP_EXTRACT is not used here.
EXTRACT_RE = re.compile(r"^EXTRACT\(([\w.]+)\)$")
# https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies#AlertStrategy (read 2026-12-01):
# notificationRateLimit is "required for alert policies with a LogMatch condition".


def log_entry(line: dict[str, Any]) -> dict[str, Any]:
    """The LogEntry Cloud Logging makes of one JSON line on stdout/stderr."""
    entry: dict[str, Any] = {"jsonPayload": {}}
    for key, value in line.items():
        if key in SPECIAL_FIELDS:
            entry[SPECIAL_FIELDS[key]] = value
        else:
            entry["jsonPayload"][key] = value
    entry.setdefault("severity", "DEFAULT")
    return entry


# -- the evaluator --------------------------------------------------------------------------------------------
TOKEN_RE = re.compile(r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<kw>AND|OR|NOT)(?=[\s()])|(?P<op>>=|<=|!=|=|:|>|<)'
                      r'|(?P<str>"(?:[^"\\]|\\.)*")|(?P<star>\*)|(?P<word>[\w.\-/]+))')


def tokens(query: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    query = query.strip()
    while pos < len(query):
        m = TOKEN_RE.match(query, pos)
        assert m and m.end() > pos, f"cannot read the query at {query[pos:]!r}"
        kind = m.lastgroup
        assert kind is not None
        value = m.group(kind)
        out.append((kind, value[1:-1].replace('\\"', '"') if kind == "str" else value))
        pos = m.end()
    return out


def _field(entry: dict[str, Any], path: str) -> Any:
    node: Any = entry
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _compare(entry: dict[str, Any], field: str, op: str, value: str) -> bool:
    found = _field(entry, field)
    if op == ":" and value == "*":
        return found is not None
    if found is None:
        return op == "!="
    if field == "severity":
        have, want = SEVERITIES[str(found).upper()], SEVERITIES[value.upper()]
        return {"=": have == want, "!=": have != want, ">=": have >= want, ">": have > want, "<=": have <= want,
                "<": have < want}[op]
    have_s, want_s = (_text(found).lower(), value.lower()) if CASE_INSENSITIVE else (_text(found), value)
    if op == "=":
        return have_s == want_s
    if op == "!=":
        return have_s != want_s
    if op == ":":
        return want_s in have_s
    number = float(found)
    return {">=": number >= float(value), ">": number > float(value), "<=": number <= float(value),
            "<": number < float(value)}[op]


class Query:
    """``matches(entry)`` for a query of comparisons, AND, OR, NOT and parentheses (AND binds tighter)."""

    def __init__(self, text: str):
        self.items, self.pos = tokens(text), 0
        self.tree = self._or()
        assert self.pos == len(self.items), f"unexpected {self.items[self.pos:]} in {text!r}"

    def _peek(self) -> tuple[str, str] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def _take(self) -> tuple[str, str]:
        item = self.items[self.pos]
        self.pos += 1
        return item

    def _or(self) -> Any:
        terms = [self._and()]
        while self._peek() == ("kw", "OR"):
            self._take()
            terms.append(self._and())
        return ("or", terms)

    def _and(self) -> Any:
        terms = [self._not()]
        while self._peek() is not None and self._peek() not in (("kw", "OR"), ("rp", ")")):
            if self._peek() == ("kw", "AND"):
                self._take()
            terms.append(self._not())  # juxtaposition is AND too
        return ("and", terms)

    def _not(self) -> Any:
        if self._peek() == ("kw", "NOT"):
            self._take()
            return ("not", self._not())
        if self._peek() == ("lp", "("):
            self._take()
            inner = self._or()
            assert self._take() == ("rp", ")")
            return inner
        kind, field = self._take()
        assert kind == "word", f"expected a field, got {field!r}"
        op_kind, op = self._take()
        assert op_kind == "op", f"expected an operator after {field}, got {op!r}"
        value_kind, value = self._take()
        assert value_kind in ("str", "word", "star"), f"expected a value after {field}{op}, got {value!r}"
        return ("cmp", field, op, value)

    def matches(self, entry: dict[str, Any], node: Any = None) -> bool:
        node = self.tree if node is None else node
        kind = node[0]
        if kind == "or":
            return any(self.matches(entry, n) for n in node[1])
        if kind == "and":
            return all(self.matches(entry, n) for n in node[1])
        if kind == "not":
            return not self.matches(entry, node[1])
        return _compare(entry, node[1], node[2], node[3])


def extract(entry: dict[str, Any], extractor: str) -> str:
    m = EXTRACT_RE.match(extractor)
    assert m, f"unsupported extractor {extractor!r}"
    value = _field(entry, m.group(1))
    return "" if value is None else _text(value)  # a failed extraction gives the label's default, ""


# -- the module -------------------------------------------------------------------------------------------------
def _resources(kind: str) -> dict[str, dict[str, Any]]:
    return {name: body for _, k, name, body in all_resources(MODULE) if k == kind}


def metrics() -> dict[str, dict[str, Any]]:
    return _resources("google_logging_metric")


def _entries(flow) -> list[dict[str, Any]]:
    return [log_entry(line) for line in flow.lines]


def _matched(flow, body: dict[str, Any]) -> list[dict[str, Any]]:
    query = Query(str(unquote(body["filter"])))
    return [e for e in _entries(flow) if query.matches(e)]


def _labels(entry: dict[str, Any], body: dict[str, Any]) -> dict[str, str]:
    extractors = first(body.get("label_extractors")) or {}
    return {k: extract(entry, str(unquote(v))) for k, v in extractors.items()}


def test_the_evaluator_reads_the_language_as_documented():
    entry = log_entry({"severity": "ERROR", "message": "Rejected X", "logger": "landfall.rejections", "n": 3,
                       "time": "2026-12-01T00:00:00Z"})
    assert entry["severity"] == "ERROR" and "severity" not in entry["jsonPayload"]
    assert "time" not in entry["jsonPayload"] and entry["jsonPayload"]["message"] == "Rejected X"
    assert Query('jsonPayload.message="rejected x"').matches(entry)  # case-insensitive, as documented
    assert Query('jsonPayload.message:"ejected"').matches(entry)
    assert Query("jsonPayload.n:*").matches(entry) and not Query("jsonPayload.missing:*").matches(entry)
    assert Query("severity>=WARNING").matches(entry) and not Query('severity>="CRITICAL"').matches(entry)
    assert not Query('jsonPayload.logger="landfall.rejections" AND NOT severity=ERROR').matches(entry)
    assert Query('jsonPayload.logger="other" OR (jsonPayload.n>=3 AND severity=ERROR)').matches(entry)
    assert not Query('jsonPayload.missing="x"').matches(entry)
    with pytest.raises(AssertionError):
        Query('jsonPayload.logger="unterminated')


def test_every_metric_filter_matches_exactly_the_lines_it_counts(small_flow):
    found = metrics()
    assert set(found) == {"rejections", "job_results", "arrival_to_start", "arrivals_converted",
                          "reconciler_heartbeat", "anomalous_detections"}
    flow = small_flow

    rejections = _matched(flow, found["rejections"])
    assert [_labels(e, found["rejections"]) for e in rejections] == [
        {"stage": "arrival", "reason": "corrupt_npy", "dataset": "sensors"}]

    results = _matched(flow, found["job_results"])
    assert sorted(tuple(_labels(e, found["job_results"]).values()) for e in results) == sorted([
        ("succeeded", "promoted", "sensors"), ("failed", "not_evaluated", "pumps")])

    latency = _matched(flow, found["arrival_to_start"])
    assert len(latency) == 1 and latency[0]["jsonPayload"]["job"] == flow.jobs["trained"]
    value = float(extract(latency[0], str(unquote(found["arrival_to_start"]["value_extractor"]))))
    assert 0 < value < 600
    assert _labels(latency[0], found["arrival_to_start"]) == {"dataset": "sensors"}

    converted = _matched(flow, found["arrivals_converted"])
    assert Counter(_labels(e, found["arrivals_converted"])["dataset"] for e in converted) == {"sensors": 4,
                                                                                              "pumps": 1}
    assert len(_matched(flow, found["reconciler_heartbeat"])) >= 1


def test_the_failed_result_alert_matches_the_failed_job_only(small_flow):
    (policy,) = [b for n, b in _resources("google_monitoring_alert_policy").items() if n == "failed_results"]
    condition = first(first(policy["conditions"])["condition_matched_log"])
    matched = _matched(small_flow, condition)
    assert [_labels(e, condition) for e in matched] == [{"job": small_flow.jobs["failed"], "dataset": "pumps"}]


@contextlib.contextmanager
def captured_lines(logger_name: str) -> Iterator[list[dict[str, Any]]]:
    """The JSON lines ``logger_name`` logs inside the block, formatted by the project's own formatter at INFO, as
    the deployed functions' logging does (alone, a test has no INFO otherwise); filled in when the block ends."""
    import io
    import json
    import logging

    from landfall.core import logs

    out, lines = io.StringIO(), []
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        lines.extend(json.loads(x) for x in out.getvalue().splitlines())


def _result_line(emulator_stack, bucket: str, verdict: str, status: str = "succeeded") -> dict[str, Any]:
    """The LogEntry of the line ``landfall.core.artifacts.results.announce`` logs when it publishes a result (the real
    call, against the emulators, its JSON line captured with the project's own formatter)."""
    from landfall.core.artifacts import results

    topic = f"results-{bucket}"
    emulator_stack.pubsub.ensure_topic(topic)
    with captured_lines("landfall.core.results") as lines:
        message = results.Result(dataset="sensors", job=f"job-{verdict}", status=status, verdict=verdict)
        assert results.announce(emulator_stack.storage, emulator_stack.pubsub, topic,
                                f"gs://{bucket}/runs/job-{verdict}-{status}", message)
    (line,) = [x for x in lines if x.get("message") == "result published"]
    return log_entry(line)


def test_the_refused_result_alert_matches_no_skill_and_low_average_precision_only(emulator_stack, bucket):
    (policy,) = [b for n, b in _resources("google_monitoring_alert_policy").items() if n == "refused_results"]
    condition = first(first(policy["conditions"])["condition_matched_log"])
    query = Query(str(unquote(condition["filter"])))
    for verdict in ("no_skill", "low_average_precision"):
        entry = _result_line(emulator_stack, bucket, verdict)
        assert query.matches(entry), verdict
        assert _labels(entry, condition) == {"job": f"job-{verdict}", "dataset": "sensors", "verdict": verdict}
    for verdict, status in (("promoted", "succeeded"), ("kept_champion", "succeeded"), ("not_evaluated", "failed")):
        assert not query.matches(_result_line(emulator_stack, bucket, verdict, status)), verdict


def _settle_lines(tmp_path, status: str) -> list[dict[str, Any]]:
    """The LogEntries ``landfall.arrival.screen.settle`` logs for an arrival with one finding and this status (the
    real call, its JSON lines captured with the project's own formatter)."""
    from landfall.arrival import screen
    from landfall.core.contracts.messages import FeatureStats, Manifest, Source
    from landfall.core.services.storage import Storage

    finding = {"check": "scale_change", "feature": "leg_vert", "measured": 687.1, "threshold": 10.0,
               "action": "quarantine" if status == "quarantined" else "warn", "detail": "x687"}
    manifest = Manifest(dataset="gait", arrival_id="a-g1-00000000", source=Source("b", "incoming/gait/a.csv", 1, 9),
                        shape=[4, 1], count=1, shards=[], stats=FeatureStats([0.0], [1.0], [0.0], [1.0]),
                        checks={"status": status, "reference": {"arrivals": 9, "rows": 9000, "generation": 1},
                                "findings": [finding] if status != "first" else [], "profile": "profile.json"})
    with captured_lines("landfall.arrival") as lines:
        screen.settle(Storage("test"), manifest, str(tmp_path / "a-g1-00000000" / "manifest.json"))
    return [log_entry(x) for x in lines]


def test_the_quarantine_alert_matches_a_quarantined_arrival_only(tmp_path):
    (policy,) = [b for n, b in _resources("google_monitoring_alert_policy").items() if n == "quarantined_arrivals"]
    condition = first(first(policy["conditions"])["condition_matched_log"])
    query = Query(str(unquote(condition["filter"])))
    (held,) = _settle_lines(tmp_path, "quarantined")
    assert query.matches(held)
    assert _labels(held, condition) == {"dataset": "gait", "arrival": "a-g1-00000000", "check": "scale_change",
                                        "feature": "leg_vert", "measured": "687.1"}
    for status in ("warned", "first", "admitted"):
        lines = _settle_lines(tmp_path, status)
        assert lines or status == "admitted"
        assert not [e for e in lines if query.matches(e)], status


def _detection_lines(tmp_path, anomalies: int) -> list[dict[str, Any]]:
    """The LogEntries ``landfall.detect.handler`` logs when it publishes a detection with this many anomalies (the
    real call that sends a summary's message, on a local folder and a recording publisher, its JSON lines captured
    with the project's own formatter)."""
    from landfall.core.artifacts.detections import MESSAGE_SCHEMA, Summary
    from landfall.core.contracts.layout import Layout
    from landfall.core.runtime import Runtime
    from landfall.core.services.storage import Storage
    from landfall.detect import handler
    from landfall.detect.config import DetectConfig

    class Publisher:
        sent: list[tuple[str, bytes, dict[str, str]]] = []

        def publish(self, topic: str, data: bytes, attributes: dict[str, str] | None = None) -> str:
            self.sent.append((topic, data, dict(attributes or {})))
            return "m-1"

    folder = tmp_path / f"scores-{anomalies}" / "gait" / "a-g1-00000000" / "gait-3"
    folder.mkdir(parents=True)
    message = {"schema": MESSAGE_SCHEMA, "detection_id": "d-1", "dataset": "gait", "arrival": "a-g1-00000000",
               "champion": {"run": "gait-3", "model": "gs://b/runs/gait-3/model", "seq": 2},
               "anomalies": anomalies, "ranges": [{"start": 4, "end": 9}] * min(anomalies, 2),
               "ranges_total": min(anomalies, 2), "scored_at": "2026-12-01T00:00:00Z"}
    summary = Summary(message, {}, {"scoring_s": 0.5}, str(folder / "summary.json"))
    rt = Runtime(DetectConfig(project="p", bucket="b"), Layout(), Storage("p"), Publisher())
    with captured_lines("landfall.detect") as lines:
        assert handler.announce(summary, rt, fresh=True) == "published"
    assert [t for t, _, _ in Publisher.sent] == ["landfall-detections"]
    return [log_entry(x) for x in lines]


def test_the_anomaly_metric_and_alert_match_an_anomalous_detection_only(tmp_path):
    """What landfall.detect.handler logs when it publishes: WARNING with the dataset and the arrival when the champion
    flagged anomalies, INFO otherwise; the metric counts the first by dataset, and the alert names both."""
    metric = metrics()["anomalous_detections"]
    (policy,) = [b for n, b in _resources("google_monitoring_alert_policy").items() if n == "anomalies_detected"]
    condition = first(first(policy["conditions"])["condition_matched_log"])
    (flagged,) = [e for e in _detection_lines(tmp_path, 3) if e["jsonPayload"]["message"] == "detections published"]
    assert flagged["severity"] == "WARNING"
    for body in (metric, condition):
        assert Query(str(unquote(body["filter"]))).matches(flagged)
    assert _labels(flagged, metric) == {"dataset": "gait"}
    assert _labels(flagged, condition) == {"dataset": "gait", "arrival": "a-g1-00000000", "anomalies": "3",
                                           "ranges": "2", "champion": "gait-3"}
    quiet = _detection_lines(tmp_path, 0)
    assert [e["severity"] for e in quiet if e["jsonPayload"]["message"] == "detections published"] == ["INFO"]
    for body in (metric, condition):
        assert not [e for e in quiet if Query(str(unquote(body["filter"]))).matches(e)]
    doc = first(policy["documentation"])
    assert "$${log.extracted_label.dataset}" in str(unquote(doc["subject"]))
    content = str(unquote(doc["content"]))
    assert "landfall trace" in content and "gs://BUCKET/scores/" in content


def test_alerts_say_what_to_do_and_log_match_alerts_are_rate_limited():
    policies = _resources("google_monitoring_alert_policy")
    assert {"dead_letters", "failed_results", "refused_results", "function_errors",
            "reconciler_heartbeat", "quarantined_arrivals", "anomalies_detected"} <= set(policies)
    local_docs = {k: v for b in blocks(load_hcl(MODULE / "main.tf"), "locals") for k, v in b.items()}
    for name, body in policies.items():
        doc = first(body["documentation"])
        content = str(unquote(doc["content"]))
        if m := re.fullmatch(r'\$\{var\.engine == "vertex" \? local\.(\w+)\.vertex : local\.\1\.cluster\}', content):
            # One text per kind of reconciler (the Deployment, or the vertex engine's scheduled job): each has steps.
            texts = first(local_docs[m.group(1)])
            assert set(texts) == {"vertex", "cluster"}, name
            assert "gcloud run jobs executions list" in texts["vertex"] and "kubectl" in texts["cluster"], name
            content = "\n".join(str(v) for v in texts.values())
        assert "1." in content and "docs/operations.md" in content, f"{name}: documentation says no steps"
        condition = first(body["conditions"])
        if "condition_matched_log" in condition:
            strategy = first(body.get("alert_strategy") or {})
            assert strategy and first(strategy.get("notification_rate_limit")), f"{name}: no notification_rate_limit"
    text = "\n".join(p.read_text() for p in MODULE.glob("*.tf"))
    charted = set(re.findall(r"google_logging_metric\.(\w+)\.name", text))
    assert charted == set(metrics()), "every log-based metric is charted or alerted on"


def test_the_heartbeat_alert_watches_the_reconciler_each_engine_runs():
    """Next to a cluster the heartbeat lines come from the Deployment's container; with the vertex engine from the
    scheduled Cloud Run job's executions (Cloud Logging's monitored resource types k8s_container and cloud_run_job):
    an alert that watched the other one would fire for ever, or never."""
    policy = _resources("google_monitoring_alert_policy")["reconciler_heartbeat"]
    condition = first(first(policy["conditions"])["condition_absent"])
    assert 'resource.type="${local.heartbeat_resource}"' in str(unquote(condition["filter"]))
    local_values = {k: v for b in blocks(load_hcl(MODULE / "main.tf"), "locals") for k, v in b.items()}
    assert str(unquote(local_values["heartbeat_resource"])) == (
        '${var.engine == "vertex" ? "cloud_run_job" : "k8s_container"}')
    platform = (INFRA / "modules" / "platform" / "main.tf").read_text()
    assert re.search(r'module "monitoring" \{[^}]*engine\s+= var\.engine', platform, re.S)
