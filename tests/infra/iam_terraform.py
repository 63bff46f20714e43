"""The IAM grants infra/ declares, read from the Terraform (python-hcl2) into ``gcp_rules.Grant``s.

Sample values stand in for the variables (``SAMPLE``); the engine is chosen (``ENGINES``: ``local.vertex`` is
whether it is ``vertex``), ``count`` and for_each are expanded with it; a condition's locals, variables and the
``join(" || ", [for ...])`` forms the modules use are expanded to the CEL text IAM receives. Anything this reader does
not understand fails loudly, so no grant is silently left out of the simulation.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .gcp_rules import Grant
from .tools import INFRA, all_resources, blocks, expr_text, first, load_hcl

PROJECT, REGION, NUMBER = "landfall-prod", "europe-west1", "123456789012"
BUCKET, SOURCES, STATE = "landfall-prod-data", "landfall-prod-sources", "landfall-prod-tfstate"
FUNCTIONS = ("on-data-arrival", "on-training-request")
JOB = "landfall-convert"
SCORER = "landfall-scorer"  # the scorer's Cloud Run service (infra/modules/scorer)
# Topics, subscriptions and repositories are named by the Terraform label or variable that names them.
SAMPLE = {
    "var.project_id": PROJECT, "var.region": REGION, "var.project_number": NUMBER,
    "data.google_project.this.number": NUMBER,
    "var.bucket_name": BUCKET, "var.sources_bucket_name": SOURCES, "var.state_bucket": STATE,
    "var.topic_name": "requests", "var.results_topic_name": "results", "var.detections_topic_name": "detections",
    "var.repository_name": "trainer", "var.functions_repository_name": "functions",
    "var.function_names": list(FUNCTIONS), "var.convert_job_name": JOB,
    "local.objects": f"projects/_/buckets/{BUCKET}/objects",
}
PUBSUB_AGENT = "pubsub-agent"
RECONCILE_JOB = "landfall-reconcile"  # the vertex engine's reconcile job (infra/modules/functions)
ENGINES = ("tfjob", "jobset", "vertex")  # what the platform's `engine` variable admits


def with_engine(text: str, engine: str) -> str:
    """``text`` with ``local.vertex`` decided for ``engine`` and the conditional and ``concat`` forms the modules use
    (``local.vertex ? A : B`` of numbers or list literals) reduced to the branch taken."""
    text = text.replace("local.vertex", "true" if engine == "vertex" else "false")
    branch = r"(\[[^\[\]]*\]|\d+)"
    while m := re.search(rf"(true|false) \? {branch} : {branch}", text):
        text = text[:m.start()] + (m.group(2) if m.group(1) == "true" else m.group(3)) + text[m.end():]
    while m := re.search(r"concat\((\[[^\[\]]*\]), (\[[^\[\]]*\])\)", text):
        items = [i for g in (m.group(1), m.group(2)) for i in split_items(g[1:-1])]
        text = text[:m.start()] + "[" + ", ".join(items) + "]" + text[m.end():]
    return text


def split_items(text: str) -> list[str]:
    """Top-level comma-separated items of a list body (commas inside quotes, brackets or ${} kept)."""
    items, depth, quoted, cur = [], 0, False, ""
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch in "[({":
            depth += 1
        elif not quoted and ch in "])}":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*items, cur.strip()] if cur.strip() else items


def resolve(value: str) -> Any:
    """A reference (``${var.x}``, ``var.x``) or literal, with interpolations substituted."""
    value = value.strip()
    m = re.fullmatch(r"\$\{([\w.\[\]\"-]+)\}", value) or re.fullmatch(r"((?:var|local|data)\.[\w.]+)", value)
    if m:
        ref = m.group(1)
        if ref not in SAMPLE:
            raise ValueError(f"no sample value for {ref}")
        return SAMPLE[ref]
    return interpolate(_literal(value))


def interpolate(text: str, **names: str) -> str:
    def sub(m: re.Match[str]) -> str:
        ref = m.group(1)
        if ref in names:
            return names[ref]
        if ref not in SAMPLE or not isinstance(SAMPLE[ref], str):
            raise ValueError(f"no sample value for ${{{ref}}} in {text!r}")
        return SAMPLE[ref]

    return re.sub(r"\$\{([\w.]+)\}", sub, text)


def _literal(template: str) -> str:
    """A quoted HCL string as its text (python-hcl2 keeps the quotes and escapes of strings inside expressions)."""
    template = template.strip()
    if len(template) >= 2 and template[0] == template[-1] == '"':
        return template[1:-1].replace('\\"', '"')
    return template


def _for(var: str, seq: str, body: str) -> list[str]:
    values = resolve(seq) if not seq.startswith("[") else [resolve(v) for v in split_items(seq[1:-1])]
    out = []
    for value in values:
        for template in split_items(body[1:-1]) if body.startswith("[") else [body]:
            out.append(interpolate(_literal(template), **{var: value}))
    return out


def expand_join(text: str) -> str:
    """``${join(" || ", ...)}`` of a list literal, a for-expression, flatten(...) or concat(...) of those."""
    m = re.fullmatch(r'\$\{join\(" \|\| ", (.*)\)\}', text.strip(), re.S)
    if not m:
        return text

    def terms(expr: str) -> list[str]:
        expr = expr.strip()
        if fm := re.fullmatch(r"(?:flatten|concat)\((.*)\)", expr, re.S):
            return [t for part in split_items(fm.group(1)) for t in terms(part)]
        if fm := re.fullmatch(r"\[for (\w+) in (\[.*?\]|[\w.]+) : (.*)\]", expr, re.S):
            return _for(fm.group(1), fm.group(2), fm.group(3).strip())
        if expr.startswith("["):
            return [interpolate(_literal(t)) for t in split_items(expr[1:-1])]
        raise ValueError(f"cannot expand {expr!r}")

    return " || ".join(terms(m.group(1)))


def condition_text(expression: str, each_key: str | None) -> str:
    text = expand_join(expression)
    text = re.sub(r'\$\{local\.prefix_condition\[(?:"([\w/]+)"|each\.key)\]\}',
                  lambda m: f'resource.name.startsWith("{SAMPLE["local.objects"]}/{m.group(1) or each_key}/")', text)
    text = text.replace("${local.list_condition}", 'resource.type == "storage.googleapis.com/Bucket"')
    text = interpolate(text, **({"each.key": each_key} if each_key else {}))
    if "${" in text:
        raise ValueError(f"unresolved condition {expression!r} -> {text!r}")
    return text


def _keys(for_each: str, locals_: dict[str, Any]) -> list[str]:
    if m := re.fullmatch(r"\$\{toset\(\[\]\)\}", for_each):
        return []
    if m := re.fullmatch(r"\$\{toset\(\[(.*)\]\)\}", for_each):
        return [str(resolve(v)) for v in split_items(m.group(1))]
    if m := re.fullmatch(r"\$\{local\.(\w+)\}", for_each):
        return list(locals_[m.group(1)])
    raise ValueError(f"cannot expand for_each {for_each!r}")


def _member(text: str, key: str | None = None) -> str:
    for pattern in (r'\$\{google_service_account\.sa\[(?:"([\w-]+)"|each\.key)\]\.member\}',
                    r"serviceAccount:\$\{var\.service_accounts\.([\w-]+)\}"):
        if m := re.fullmatch(pattern, text):
            return m.group(1) or str(key)
    if "gcp-sa-pubsub" in text or text == "${local.pubsub_service_agent}":
        return PUBSUB_AGENT
    return text


def _role(text: str, deployer_roles: dict[str, str]) -> str:
    if m := re.fullmatch(r"\$\{google_project_iam_custom_role\.(\w+)\.name\}", text):
        return f"custom:{m.group(1)}"
    if m := re.fullmatch(r"\$\{var\.deployer_roles\.(\w+)\}", text):
        return _role(deployer_roles[m.group(1)], {})
    return text


def _on(kind: str, body: dict[str, Any], key: str | None) -> str:
    def field(name: str) -> str:
        return expr_text(body[name])

    if kind == "google_project_iam_member":
        return "project"
    if kind == "google_storage_bucket_iam_member":
        return "bucket:" + (key if field("bucket") == "${each.key}" else str(resolve(field("bucket"))))
    if kind == "google_pubsub_topic_iam_member":
        t = field("topic")
        m = re.fullmatch(r"\$\{google_pubsub_topic\.(\w+)\.name\}", t)
        return "topic:" + (m.group(1) if m else str(resolve(t)))
    if kind == "google_pubsub_subscription_iam_member":
        assert field("subscription") == "${each.value}", body
        return f"subscription:{key}"
    if kind == "google_service_account_iam_member":
        sa = r'\$\{google_service_account\.sa\[(?:"([\w-]+)"|each\.key)\]\.name\}'
        m = re.fullmatch(sa, field("service_account_id"))
        assert m, body
        return f"sa:{m.group(1) or key}"
    if kind == "google_artifact_registry_repository_iam_member":
        return f"repo:{resolve(field('repository'))}"
    if kind == "google_cloud_run_v2_job_iam_member":
        if field("name") == "${google_cloud_run_v2_job.reconcile[0].name}":
            return f"job:{RECONCILE_JOB}"
        assert field("name") == "${google_cloud_run_v2_job.convert.name}", body
        return f"job:{JOB}"
    if kind == "google_cloud_run_v2_service_iam_member":
        if field("name") == "${google_cloud_run_v2_service.scorer.name}":
            return f"service:{SCORER}"
        assert field("name") == "${each.value.service_config[0].service}", body
        return f"service:{key}"  # a gen2 function's service has the function's name
    if kind == "google_cloudfunctions2_function_iam_member":
        assert field("cloud_function") == "${each.value.name}", body
        return f"function:{key}"
    raise ValueError(f"unknown IAM resource kind {kind}")


def custom_roles(root: Path = INFRA) -> dict[str, frozenset[str]]:
    out = {}
    for _path, kind, name, body in all_resources(root):
        if kind == "google_project_iam_custom_role":
            perms = first(body["permissions"])
            out[f"custom:{name}"] = frozenset(str(p) for p in (perms if isinstance(perms, list) else [perms]))
    return out


def grants(root: Path = INFRA, engine: str = "jobset") -> list[Grant]:
    """Every ``*_iam_member`` under ``root`` as the bindings it makes with ``engine`` (count and for_each expanded)."""
    assert engine in ENGINES, engine
    deployer_roles = {}
    iam_outputs = root / "modules" / "iam" / "outputs.tf"
    for block in blocks(load_hcl(iam_outputs), "output"):
        if "deployer_roles" in block:
            deployer_roles = {k: str(v) for k, v in first(block["deployer_roles"]["value"]).items()}
    out = []
    for path, kind, name, body in all_resources(root):
        if not kind.endswith("_iam_member"):
            continue
        locals_ = {k: v for b in blocks(load_hcl(path), "locals") for k, v in b.items()}
        if "count" in body:
            count = with_engine(expr_text(body["count"]), engine)
            if not (m := re.fullmatch(r"\$\{(\d+)\}", count)) or int(m.group(1)) > 1:
                raise ValueError(f"{kind}.{name}: cannot expand count {count!r}")
            if int(m.group(1)) == 0:
                continue
        keys = _keys(with_engine(expr_text(body["for_each"]), engine), locals_) if "for_each" in body else [None]
        cond = body.get("condition")
        for key in keys:
            out.append(Grant(
                where=f"{path.relative_to(root)}:{kind}.{name}" + (f'["{key}"]' if key else ""),
                member=_member(expr_text(body["member"]), key),
                role=_role(expr_text(body["role"]), deployer_roles),
                on=_on(kind, body, key),
                condition=condition_text(expr_text(first(cond)["expression"]), key) if cond else None,
            ))
    return out
