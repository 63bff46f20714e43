"""Google Cloud's authorization rules, as Google publishes them, and an evaluator that applies them.

Nothing here is what Landfall's code or Terraform believes: each rule is data with the page it comes from and the
date it was read, so a test that uses it checks our grants against the platform, not against our model of it.
Role permissions come from Google's ``roles.get`` (``tests/infra/gcp/roles.json``, with its source).

The evaluator answers one question the way IAM does for an allow policy: may ``member`` use ``permission`` on
``resource``? It looks at every binding on the resource and on its ancestors (the policies IAM checks), keeps those
whose role carries the permission, and evaluates each binding's condition with the attributes the resource's
service actually supplies. A condition part that reads an attribute the service does not recognize never grants.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

READ = "2026-12-01"


@dataclass(frozen=True)
class Rule:
    value: object
    source: str
    read: str = READ


# Resource attributes (resource.service, resource.type, resource.name) in IAM Conditions are available for these
# services only; "Other services and resource types do not recognize resource attributes." Cloud Run
# (run.googleapis.com), Cloud Functions (cloudfunctions.googleapis.com), Pub/Sub (pubsub.googleapis.com: only
# Pub/Sub Lite is listed), Artifact Registry and IAM are not among them.
RESOURCE_ATTRIBUTE_SERVICES = Rule(
    frozenset({
        "apigee.googleapis.com", "apihub.googleapis.com", "backupdr.googleapis.com", "bigquery.googleapis.com",
        "bigqueryreservation.googleapis.com", "bigtableadmin.googleapis.com", "binaryauthorization.googleapis.com",
        "clouddeploy.googleapis.com", "cloudkms.googleapis.com", "cloudresourcemanager.googleapis.com",
        "compute.googleapis.com", "container.googleapis.com", "connectors.googleapis.com", "firestore.googleapis.com",
        "dataform.googleapis.com", "iap.googleapis.com", "integrations.googleapis.com", "logging.googleapis.com",
        "pubsublite.googleapis.com", "secretmanager.googleapis.com", "spanner.googleapis.com",
        "sqladmin.googleapis.com", "storage.googleapis.com",
    }),
    "https://cloud.google.com/iam/docs/conditions-resource-attributes#resource-service",
)

# "Support for inherited conditions": when a condition checks a resource attribute that the resource being accessed
# does not have (its service does not recognize it), that part of the condition is never interpreted as granting
# access. Modelled as a third truth value, UNKNOWN, that a grant never turns into access (and `!` cannot flip).
UNAVAILABLE_NEVER_GRANTS = Rule(
    True, "https://cloud.google.com/iam/docs/conditions-attribute-reference#inherited-conditions")

# Resource name formats Cloud Storage supplies to conditions (uniform bucket-level access: no object ACLs).
STORAGE_NAMES = Rule(
    {"storage.googleapis.com/Bucket": "projects/_/buckets/{bucket}",
     "storage.googleapis.com/Object": "projects/_/buckets/{bucket}/objects/{object}"},
    "https://cloud.google.com/iam/docs/conditions-resource-attributes#resource-name",
)

# The resource each Cloud Storage permission is checked on (JSON API methods): listing a bucket's objects is a
# request on the bucket, so it is authorized against the bucket, whose name has no object part.
STORAGE_CHECKED_ON = Rule(
    {"storage.objects.list": "storage.googleapis.com/Bucket",
     "storage.objects.get": "storage.googleapis.com/Object",
     "storage.objects.create": "storage.googleapis.com/Object",
     "storage.objects.delete": "storage.googleapis.com/Object",
     "storage.objects.update": "storage.googleapis.com/Object"},
    "https://cloud.google.com/storage/docs/access-control/iam-json",
)

# A resource's effective allow policy is the union of its own and its ancestors' ("Resources inherit the allow
# policies of the parent resource"). Long-running operations (projects/P/locations/R/operations/O) have no allow
# policy of their own (Cloud Functions' permissions list getIamPolicy/setIamPolicy for functions only, none for
# operations), so operations.get is granted only through the project.
POLICY_INHERITANCE = Rule(True, "https://cloud.google.com/iam/docs/resource-hierarchy-access-control")
OPERATIONS_ON_PROJECT = Rule(True, "https://cloud.google.com/functions/docs/reference/iam/permissions")

ROLES_FILE = Path(__file__).resolve().parent / "gcp" / "roles.json"


def predefined_roles() -> dict[str, frozenset[str]]:
    data = json.loads(ROLES_FILE.read_text())
    return {role: frozenset(entry["includedPermissions"]) for role, entry in data["roles"].items()}


# --- resources ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resource:
    """What IAM sees of a resource: its service, type and name (for conditions), and the policies it checks, from
    the resource itself up to the project (``kind:id`` keys, as ``Grant.on`` names them)."""

    service: str
    type: str
    name: str
    policies: tuple[str, ...]


PROJECT = "project"


def bucket(b: str) -> Resource:
    return Resource("storage.googleapis.com", "storage.googleapis.com/Bucket",
                    STORAGE_NAMES.value["storage.googleapis.com/Bucket"].format(bucket=b), (f"bucket:{b}", PROJECT))


def obj(b: str, name: str) -> Resource:
    return Resource("storage.googleapis.com", "storage.googleapis.com/Object",
                    STORAGE_NAMES.value["storage.googleapis.com/Object"].format(bucket=b, object=name),
                    (f"bucket:{b}", PROJECT))


def _named(service: str, kind: str, rtype: str, ident: str, name: str) -> Resource:
    return Resource(service, f"{service}/{rtype}", name, (f"{kind}:{ident}", PROJECT))


def run_service(project: str, region: str, s: str) -> Resource:
    return _named("run.googleapis.com", "service", "Service", s, f"projects/{project}/locations/{region}/services/{s}")


def run_job(project: str, region: str, j: str) -> Resource:
    return _named("run.googleapis.com", "job", "Job", j, f"projects/{project}/locations/{region}/jobs/{j}")


def function(project: str, region: str, f: str) -> Resource:
    return _named("cloudfunctions.googleapis.com", "function", "Function", f,
                  f"projects/{project}/locations/{region}/functions/{f}")


def operation(service: str, project: str, region: str) -> Resource:
    assert OPERATIONS_ON_PROJECT.value
    name = f"projects/{project}/locations/{region}/operations/op-1"
    return Resource(service, f"{service}/Operation", name, (PROJECT,))


def topic(project: str, t: str) -> Resource:
    return _named("pubsub.googleapis.com", "topic", "Topic", t, f"projects/{project}/topics/{t}")


def subscription(project: str, s: str) -> Resource:
    return _named("pubsub.googleapis.com", "subscription", "Subscription", s, f"projects/{project}/subscriptions/{s}")


def service_account(project: str, account: str) -> Resource:
    return _named("iam.googleapis.com", "sa", "ServiceAccount", account,
                  f"projects/{project}/serviceAccounts/landfall-{account}@{project}.iam.gserviceaccount.com")


def repository(project: str, region: str, r: str) -> Resource:
    return _named("artifactregistry.googleapis.com", "repo", "Repository", r,
                  f"projects/{project}/locations/{region}/repositories/{r}")


def project_level(service: str, project: str, rtype: str) -> Resource:
    """A resource whose only IAM parent is the project (a cluster's credentials, a log entry)."""
    return Resource(service, f"{service}/{rtype}", f"projects/{project}", (PROJECT,))


# --- conditions (the subset of CEL that IAM Conditions use here) -------------------------------------------------
class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
_CEL = [
    (re.compile(r"resource\.(name|type|service)\.(startsWith|endsWith)\("), r"_\2(\1, "),
    (re.compile(r"resource\.(name|type|service)\s*==\s*"), r"_eq(\1, "),
]


def _to_python(expression: str) -> ast.Expression:
    text = expression
    for pattern, repl in _CEL:
        text = pattern.sub(repl, text)
    # _eq(name, "x") needs its closing parenthesis after the string literal
    text = re.sub(r'_eq\((\w+), ("(?:[^"\\]|\\.)*")', r"_eq(\1, \2)", text)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    if "resource." in text:
        raise ValueError(f"unsupported condition: {expression!r}")
    return ast.parse(text.strip(), mode="eval")


def evaluate(expression: str, resource: Resource) -> object:
    """True, False or UNKNOWN (an attribute the resource's service does not supply was read)."""
    available = resource.service in RESOURCE_ATTRIBUTE_SERVICES.value
    attrs = {"name": resource.name, "type": resource.type, "service": resource.service}

    def node(n: ast.AST) -> object:
        if isinstance(n, ast.BoolOp):
            values = [node(v) for v in n.values]
            if isinstance(n.op, ast.Or):
                return True if True in values else (UNKNOWN if UNKNOWN in values else False)
            return False if False in values else (UNKNOWN if UNKNOWN in values else True)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            v = node(n.operand)
            return UNKNOWN if v is UNKNOWN else not v
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            attr, arg = n.args[0].id, ast.literal_eval(n.args[1])
            if not available:
                return UNKNOWN
            value = attrs[attr]
            return {"_startsWith": value.startswith, "_endsWith": value.endswith,
                    "_eq": value.__eq__}[n.func.id](arg)
        if isinstance(n, ast.Name) and n.id in ("true", "false"):  # CEL's literals
            return n.id == "true"
        raise ValueError(f"unsupported condition part: {ast.dump(n)}")

    return node(_to_python(expression).body)


# --- policies ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grant:
    where: str  # the Terraform address that makes it
    member: str  # the workload (landfall-<member>) or another principal
    role: str
    on: str  # the policy it is bound in: "project", "bucket:B", "function:F", ...
    condition: str | None = None


@dataclass
class Policy:
    grants: list[Grant]
    roles: dict[str, frozenset[str]] = field(default_factory=predefined_roles)

    def allows(self, member: str, permission: str, resource: Resource) -> list[Grant]:
        """The grants that give ``member`` ``permission`` on ``resource`` as IAM evaluates them (empty: denied)."""
        out = []
        for g in self.grants:
            if g.member != member or g.on not in resource.policies:
                continue
            if permission not in self.roles[g.role]:
                continue
            if g.condition is None or evaluate(g.condition, resource) is True:
                out.append(g)
        return out
