"""A small fake Kubernetes API server for the TFJob collection (``kubeflow.org/v1``, ``tfjobs``) and the JobSet
collection (``jobset.x-k8s.io/v1alpha2``, ``jobsets``).

No kube-apiserver can run on the test machines, so ``landfall.submit.backends.kube`` (the official client) is tested
against this threaded ``http.server`` that answers like the real one does for what Landfall uses:

- ``POST   .../namespaces/NS/tfjobs``: 201 with ``metadata.{uid,resourceVersion,generation,creationTimestamp}``;
  409 ``AlreadyExists`` Status for a taken name; 422 ``Invalid`` Status when the body breaks the TFJob
  schema (no ``spec.tfReplicaSpecs``, a replica without containers, a bad restart policy...) or the
  object-meta rules below.
- ``GET    .../tfjobs/NAME``: 200 or 404 ``NotFound`` Status.
- ``GET    .../tfjobs?labelSelector=k=v,k2!=v2``: a ``TFJobList``.
- ``PATCH  .../tfjobs/NAME`` (``application/merge-patch+json``): RFC 7386 merge; a ``metadata.resourceVersion``
  in the patch that is not the current one is a 409 ``Conflict``; the merged result is checked again (422,
  and the size limits below).
- ``PATCH  .../tfjobs/NAME/status``: the status subresource (the tests play the training operator); only
  ``.status`` changes, so only the size limits apply.
- ``DELETE .../tfjobs/NAME``: 200 or 404.
- ``fail_next(n, code)``: the next n requests answer ``code`` (429/503 for the temporary-failure tests).

The real API server's limits, checked in its order (body size, then validation, then etcd), on POST, on
the result of a merge PATCH, and (size only) on the status subresource:

- ``metadata.name``: required, a DNS-1123 subdomain (lowercase ``[a-z0-9]([-a-z0-9]*[a-z0-9])?`` labels
  joined by ``.``) of at most 253 characters: what the API server asks of any custom resource. The fake
  applies no stricter TFJob rule (the training operator's optional admission webhook, which asks for a
  DNS-1035 label, is not modelled; ``landfall.submit.jobmeta.job_name`` already keeps to a 47-character
  DNS-1035 label).
- ``metadata.labels``: keys are qualified names (an optional DNS-1123 subdomain prefix of at most 253
  characters and ``/``, then a name of at most 63 characters matching
  ``([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]``); values at most 63 characters matching
  ``(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?``. A break is 422 ``Invalid`` with apimachinery's messages,
  e.g. ``metadata.labels: Invalid value: "aaa...": must be no more than 63 characters`` (cause
  ``FieldValueInvalid``, field ``metadata.labels``).
- ``metadata.annotations``: qualified-name keys (checked lowercased), and all keys + values together at
  most 262144 bytes (256 KiB, UTF-8): else 422 ``Invalid``,
  ``metadata.annotations: Too long: must have at most 262144 bytes`` (cause ``FieldValueTooLong``, field
  ``metadata.annotations``). Newer API servers word the detail ``may not be more than 262144 bytes``:
  match on the reason and field, not on the wording.
- Request body over 3 MiB (``--max-request-bytes`` of the API server, 3145728 bytes): 413
  ``RequestEntityTooLarge`` Status, ``Request entity too large: limit is 3145728``, before any decoding.
- The object to store over etcd's request limit (``--max-request-bytes`` of etcd, 1.5 MiB = 1572864
  bytes, measured here as the compact JSON of the object as stored, server-set metadata included; the
  real request also carries the key, ``managedFields`` and framing, so stay well below): the real API
  server passes etcd's ``etcdserver: request is too large`` through as a **500** Status with no reason
  (kubernetes/kubernetes#74600, #112152), which ``landfall.submit.backends.kube`` maps to ``TemporaryError``.
  ``FakeKubeAPI(etcd_too_large_code=413)`` answers 413 ``RequestEntityTooLarge`` (same message) instead,
  for a test that wants the permanent reading.

Status bodies follow apimachinery: an ``Invalid`` one has ``details.{name,group,kind=TFJob,causes}`` and
the message ``TFJob.kubeflow.org "NAME" is invalid: ERR`` (``[ERR1, ERR2]`` for several).

JobSets get the same routes, limits and Status bodies (``JobSet.jobset.x-k8s.io``, ``jobsets.jobset.x-k8s.io``),
and their schema check is the JobSet CRD's own ``openAPIV3Schema`` (``tests/infra/crds/jobset``: types,
enums, required fields, as the API server's structural validation; unknown fields are not refused, the
server prunes them), plus the object-meta rules above.

A CRD that is not installed (``FakeKubeAPI(served=...)``, ``uninstall``/``install``; both are served by default):
the real API server has no handler for its paths, so every request under them (the collection, a named object,
its status) falls through the apiextensions server's CRD handler (``customresource_handler.go``: no CRD named
``<plural>.<group>``) to the end of the delegation chain, ``k8s.io/apiserver/pkg/util/notfoundhandler``, which
answers 404 with a Status of reason ``NotFound``, the message ``the server could not find the requested
resource`` and no ``details`` (``not_found_body``). API discovery, ``GET /apis/<group>/<version>``, answers the
``APIResourceList`` of the resources served there (each with its ``/status`` subresource), or that same 404
when none is (the group/version is not registered at all). A named object that is not there is another 404:
``tfjobs.kubeflow.org "NAME" not found`` with ``details.{name,group,kind}`` (``status_body``).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlparse

from tests.fakes.http import JSONHandler, LoopbackServer

_PATH = re.compile(r"^/apis/([^/]+)/([^/]+)/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?(/status)?/?$")
_DISCOVERY = re.compile(r"^/apis/([^/]+)/([^/]+)/?$")


class Resource(NamedTuple):
    group: str
    version: str
    plural: str
    kind: str


TFJOBS = Resource("kubeflow.org", "v1", "tfjobs", "TFJob")
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
RESOURCES = {(r.group, r.version, r.plural): r for r in (TFJOBS, JOBSETS)}
JOBSET_CRD = Path(__file__).resolve().parents[1] / "infra" / "crds" / "jobset" / "jobset.x-k8s.io_jobsets.yaml"
_RESTART = ("Always", "OnFailure", "Never", "ExitCode")
_CLEAN = ("All", "Running", "None")

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver --max-request-bytes default: 413 above it
MAX_ETCD_REQUEST_BYTES = 1536 * 1024  # etcd --max-request-bytes default (1.5 MiB): "request is too large"
MAX_ANNOTATIONS_BYTES = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB
MAX_NAME = 253  # DNS-1123 subdomain
MAX_LABEL = 63  # label value, qualified-name name part

# apimachinery/pkg/util/validation: formats and messages, verbatim.
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character")
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encoded_size(obj: Any) -> int:
    """Bytes of ``obj`` as compact JSON (UTF-8): the size the fake holds against etcd's request limit."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def not_found_body() -> dict[str, Any]:
    """What ``notfoundhandler`` answers for a path nothing serves (a resource whose CRD is not installed, an
    unregistered group/version): no ``details``, whatever the path named."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}


def resource_list(group: str, version: str, served: list[Resource]) -> dict[str, Any]:
    """``GET /apis/<group>/<version>``: the ``APIResourceList`` of what is served there (as a CRD serves it:
    the resource, namespaced, with its verbs, and its ``/status`` subresource)."""
    resources: list[dict[str, Any]] = []
    for r in sorted(served, key=lambda r: r.plural):
        resources += [
            {"name": r.plural, "singularName": r.kind.lower(), "namespaced": True, "kind": r.kind,
             "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]},
            {"name": f"{r.plural}/status", "singularName": "", "namespaced": True, "kind": r.kind,
             "verbs": ["get", "patch", "update"]},
        ]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
            "resources": resources}


def status_body(code: int, reason: str, message: str, name: str = "", res: Resource = TFJOBS) -> dict[str, Any]:
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": reason, "details": {"name": name, "group": res.group, "kind": res.plural}, "code": code,
    }


class FieldError(NamedTuple):
    """One apimachinery ``field.Error``: ``str()`` is its ``Error()``, ``body`` its ``ErrorBody()``."""

    field: str
    type: str  # the StatusCause type: FieldValueInvalid, FieldValueRequired, FieldValueTooLong...
    body: str

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"

    @classmethod
    def parse(cls, text: str) -> FieldError:
        field, _, body = text.partition(": ")
        kind = ("FieldValueRequired" if body.startswith("Required value") else
                "FieldValueNotSupported" if body.startswith("Unsupported value") else
                "FieldValueTooLong" if body.startswith("Too long") else "FieldValueInvalid")
        return cls(field, kind, body)


def invalid_body(name: str, errs: list[FieldError], res: Resource = TFJOBS) -> dict[str, Any]:
    """``apierrors.NewInvalid(TFJob.kubeflow.org, name, errs)`` (or ``JobSet.jobset.x-k8s.io``)."""
    unique = list(dict.fromkeys(str(e) for e in errs))
    agg = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'{res.kind}.{res.group} "{name}" is invalid: {agg}', "reason": "Invalid",
        "details": {"name": name, "group": res.group, "kind": res.kind,
                    "causes": [{"reason": e.type, "message": e.body, "field": e.field} for e in errs]},
        "code": 422,
    }


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # Go's %q, for what Landfall sends


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = [_max_len(MAX_NAME)] if len(value.encode()) > MAX_NAME else []
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                   "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(parts[0])]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > MAX_LABEL:
        errs.append("name part " + _max_len(MAX_LABEL))
    if not _QUALIFIED_NAME.fullmatch(name):
        errs.append("name part " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = [_max_len(MAX_LABEL)] if len(value.encode()) > MAX_LABEL else []
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def object_meta_errors(meta: Any) -> list[FieldError]:
    """``ValidateObjectMetaAccessor`` with ``NameIsDNSSubdomain``: name, then labels, then annotations."""
    if not isinstance(meta, dict):
        return [FieldError("metadata", "FieldValueInvalid", "Invalid value: must be an object")]
    errs: list[FieldError] = []
    name = meta.get("name")
    if name is None or name == "":
        errs.append(FieldError("metadata.name", "FieldValueRequired",
                               "Required value: name or generateName is required"))
    elif not isinstance(name, str):
        errs.append(FieldError("metadata.name", "FieldValueInvalid", "Invalid value: must be a string"))
    else:
        errs += [FieldError("metadata.name", "FieldValueInvalid", f"Invalid value: {_quote(name)}: {m}")
                 for m in is_dns1123_subdomain(name)]
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            errs.append(FieldError(f"metadata.{field}", "FieldValueInvalid", "Invalid value: values must be strings"))
    labels = meta.get("labels") or {}
    if isinstance(labels, dict):
        for k in sorted(labels):
            v = labels[k]
            errs += [FieldError("metadata.labels", "FieldValueInvalid", f"Invalid value: {_quote(k)}: {m}")
                     for m in is_qualified_name(k)]
            if isinstance(v, str):
                errs += [FieldError("metadata.labels", "FieldValueInvalid", f"Invalid value: {_quote(v)}: {m}")
                         for m in is_valid_label_value(v)]
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict):
        for k in sorted(annotations):
            errs += [FieldError("metadata.annotations", "FieldValueInvalid", f"Invalid value: {_quote(k)}: {m}")
                     for m in is_qualified_name(k.lower())]
        total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items() if isinstance(v, str))
        if total > MAX_ANNOTATIONS_BYTES:
            errs.append(FieldError("metadata.annotations", "FieldValueTooLong",
                                   f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"))
    return errs


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def validate(obj: Any) -> list[str]:
    """The parts of the TFJob CRD's structural schema and the object-meta rules Landfall can break."""
    return [str(e) for e in field_errors(obj)]


def field_errors(obj: Any, res: Resource = TFJOBS) -> list[FieldError]:
    """``validate`` as ``FieldError``s (the ``causes`` of an ``Invalid`` Status)."""
    if not isinstance(obj, dict):
        return [FieldError.parse("body: must be an object")]
    errs = object_meta_errors(obj.get("metadata") or {})
    schema = _jobset_schema_errors if res == JOBSETS else _schema_errors
    return errs + [FieldError.parse(e) for e in schema(obj)]


@functools.cache
def _jobset_validator() -> Any:
    import jsonschema
    import yaml

    crd = yaml.safe_load(JOBSET_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == JOBSETS.version]
    schema = version["schema"]["openAPIV3Schema"]
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema)


def _jobset_schema_errors(obj: dict[str, Any]) -> list[str]:
    """The JobSet CRD's structural schema, as the API server checks it (unknown fields are pruned there, so
    only types, enums, formats of numbers and required fields are errors here)."""
    errs = []
    if obj.get("apiVersion") != "jobset.x-k8s.io/v1alpha2" or obj.get("kind") != "JobSet":
        errs.append("apiVersion/kind: must be jobset.x-k8s.io/v1alpha2 JobSet")
    body = {k: v for k, v in obj.items() if k != "metadata"}  # object meta: checked by object_meta_errors
    for e in sorted(_jobset_validator().iter_errors(body), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(p) for p in e.absolute_path) or "<root>"
        errs.append(f"{where}: Invalid value: {e.message}")
    if not (obj.get("spec") or {}).get("replicatedJobs"):
        errs.append("spec.replicatedJobs: Required value")
    return errs


def _schema_errors(obj: dict[str, Any]) -> list[str]:
    errs: list[str] = []
    if obj.get("apiVersion") != "kubeflow.org/v1" or obj.get("kind") != "TFJob":
        errs.append("apiVersion/kind: must be kubeflow.org/v1 TFJob")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [*errs, "spec: Required value"]
    replicas = spec.get("tfReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        errs.append("spec.tfReplicaSpecs: Required value")
        replicas = {}
    for kind, rs in replicas.items():
        where = f"spec.tfReplicaSpecs.{kind}"
        if kind not in ("Chief", "Master", "PS", "Worker", "Evaluator"):
            errs.append(f"{where}: unsupported replica type")
        if not isinstance(rs, dict):
            errs.append(f"{where}: must be an object")
            continue
        if "replicas" in rs and (not isinstance(rs["replicas"], int) or rs["replicas"] < 0):
            errs.append(f"{where}.replicas: must be a non-negative integer")
        if rs.get("restartPolicy", "Never") not in _RESTART:
            errs.append(f"{where}.restartPolicy: Unsupported value: {rs.get('restartPolicy')!r}")
        containers = ((rs.get("template") or {}).get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            errs.append(f"{where}.template.spec.containers: Required value")
            continue
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name") or not c.get("image"):
                errs.append(f"{where}.template.spec.containers[{i}]: name and image are required")
            elif not all(isinstance(a, str) for a in c.get("args", []) + c.get("command", [])):
                errs.append(f"{where}.template.spec.containers[{i}].args: must be strings")
    run = spec.get("runPolicy") or {}
    if run.get("cleanPodPolicy", "None") not in _CLEAN:
        errs.append(f"spec.runPolicy.cleanPodPolicy: Unsupported value: {run.get('cleanPodPolicy')!r}")
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        if key in run and (not isinstance(run[key], int) or run[key] < 0):
            errs.append(f"spec.runPolicy.{key}: must be a non-negative integer")
    if "suspend" in run and not isinstance(run["suspend"], bool):
        errs.append("spec.runPolicy.suspend: must be a boolean")
    return errs


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def too_large_body(limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """``apierrors.NewRequestEntityTooLargeError``: what the API server answers to a body over its limit."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"Request entity too large: limit is {limit}", "reason": "RequestEntityTooLarge", "code": 413}


def etcd_too_large_body(code: int = 500) -> dict[str, Any]:
    """etcd's ``ErrRequestTooLarge`` as the API server passes it on: a reasonless 500 (or 413, see above)."""
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": "etcdserver: request is too large", "code": code}
    if code == 413:
        out["reason"] = "RequestEntityTooLarge"
    return out


class FakeKubeAPI:
    def __init__(self, etcd_too_large_code: int = 500, served: tuple[Resource, ...] | None = None) -> None:
        """``served``: the resources whose CRD is installed (default: the TFJob's and the JobSet's); others of the
        same group/version (``Resource("kubeflow.org", "v1", "notebooks", "Notebook")``) are listed by API
        discovery only."""
        self.etcd_too_large_code = etcd_too_large_code
        self.served: set[Resource] = set(RESOURCES.values() if served is None else served)
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}  # the TFJobs
        self.jobsets: dict[tuple[str, str], dict[str, Any]] = {}
        self.stores = {TFJOBS: self.objects, JOBSETS: self.jobsets}
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self._failures: list[int] = []
        self._version = 0
        api = self

        class Handler(JSONHandler):
            def respond(self, method: str) -> None:
                url = urlparse(self.path)
                raw = self.body_bytes()
                # like the API server, nothing over the body limit is decoded
                body = json.loads(raw or b"null") if len(raw) <= MAX_BODY_BYTES else None
                code, out = api.handle(method, url.path, parse_qs(url.query), body,
                                       self.headers.get("Content-Type", ""), body_size=len(raw))
                self.send_json(code, out)

        self.http = LoopbackServer(Handler)
        self.host = f"http://{self.http.address}"

    def __enter__(self) -> FakeKubeAPI:
        self.http.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.http.stop()

    # -- test controls -----------------------------------------------------------------------------------
    def uninstall(self, res: Resource) -> None:
        """Deletes the resource's CRD (its objects go with it, as the API server deletes a CRD's objects)."""
        with self.lock:
            self.served.discard(res)
            if res in self.stores:
                self.stores[res].clear()

    def install(self, res: Resource) -> None:
        with self.lock:
            self.served.add(res)

    def fail_next(self, n: int, code: int = 503) -> None:
        with self.lock:
            self._failures += [code] * n

    def set_condition(self, namespace: str, name: str, kind: str, reason: str = "", status: str = "True",
                      res: Resource = TFJOBS) -> None:
        """What the training operator (or JobSet controller) does: append a condition."""
        with self.lock:
            obj = self.stores[res][(namespace, name)]
            st = obj.setdefault("status", {})
            conds = st.setdefault("conditions", [])
            for c in conds:
                if c["type"] in ("Running", "Restarting", "Created") and kind in ("Succeeded", "Failed"):
                    c["status"] = "False"
            conds.append({"type": kind, "status": status, "reason": reason or f"TFJob{kind}",
                          "message": f"TFJob {name} is {kind.lower()}.", "lastUpdateTime": _now(),
                          "lastTransitionTime": _now()})
            self._bump(obj)

    def names(self, namespace: str = "landfall-training", res: Resource = TFJOBS) -> list[str]:
        with self.lock:
            return sorted(n for (ns, n) in self.stores[res] if ns == namespace)

    # -- the API -----------------------------------------------------------------------------------------
    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    def _too_large(self, obj: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """etcd's request limit, held against the object as it would be stored."""
        if encoded_size(obj) > MAX_ETCD_REQUEST_BYTES:
            return self.etcd_too_large_code, etcd_too_large_body(self.etcd_too_large_code)
        return None

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any,
               content_type: str, body_size: int | None = None) -> tuple[int, dict[str, Any]]:
        """One request; ``body_size`` is the raw body's length in bytes (else that of ``body`` as JSON)."""
        with self.lock:
            self.requests.append((method, path))
            if self._failures:
                code = self._failures.pop(0)
                reason = "TooManyRequests" if code == 429 else "ServiceUnavailable"
                return code, status_body(code, reason, "injected failure")
            found = _DISCOVERY.match(path)
            if found and method == "GET":
                here = [r for r in self.served if (r.group, r.version) == found.groups()]
                return (200, resource_list(*found.groups(), here)) if here else (404, not_found_body())
            m = _PATH.match(path)
            res = RESOURCES.get((m.group(1), m.group(2), m.group(4))) if m else None
            if not m or res is None or res not in self.served:
                return 404, not_found_body()
            ns, name, sub = m.group(3), m.group(5), m.group(6)
            store = self.stores[res]
            what = f"{res.plural}.{res.group}"
            if method in ("POST", "PATCH", "PUT"):
                size = encoded_size(body) if body_size is None else body_size
                if size > MAX_BODY_BYTES:
                    return 413, too_large_body()
            if name is None:
                if method == "GET":
                    selector = (query.get("labelSelector") or [""])[0]
                    items = [copy.deepcopy(o) for (n, _), o in sorted(store.items())
                             if n == ns and _selector_matches(selector, o["metadata"].get("labels") or {})]
                    return 200, {"apiVersion": f"{res.group}/{res.version}", "kind": f"{res.kind}List",
                                 "metadata": {"resourceVersion": str(self._version)}, "items": items}
                if method == "POST":
                    return self._create(ns, body, res)
                return 405, status_body(405, "MethodNotAllowed", f"{method} is not allowed", res=res)
            key = (ns, name)
            if key not in store:
                return 404, status_body(404, "NotFound", f'{what} "{name}" not found', name, res)
            obj = store[key]
            if method == "GET":
                return 200, copy.deepcopy(obj)
            if method == "DELETE":
                del store[key]
                return 200, status_body(200, "", "deleted", name, res) | {"status": "Success"}
            if method == "PATCH":
                if "merge-patch" not in content_type:
                    return 415, status_body(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
                want = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if want is not None and want != obj["metadata"]["resourceVersion"]:
                    return 409, status_body(
                        409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": the object '
                        "has been modified; please apply your changes to the latest version and try again", name, res)
                if sub:  # status subresource: only .status changes
                    new = copy.deepcopy(obj)
                    new["status"] = merge_patch(new.get("status") or {}, (body or {}).get("status") or {})
                else:
                    patch = copy.deepcopy(body or {})
                    patch.pop("status", None)
                    for frozen in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
                        (patch.get("metadata") or {}).pop(frozen, None)
                    new = merge_patch(copy.deepcopy(obj), patch)  # nothing shared with the stored one
                    if new.get("spec") != obj.get("spec"):
                        new["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
                errs = field_errors(new, res)
                if errs:
                    return 422, invalid_body(name, errs, res)
                new["metadata"]["resourceVersion"] = str(self._version + 1)  # as it would be stored
                refused = self._too_large(new)
                if refused:
                    return refused
                self._bump(new)
                store[key] = new
                return 200, copy.deepcopy(new)
            return 405, status_body(405, "MethodNotAllowed", f"{method} is not allowed")

    def _create(self, ns: str, body: Any, res: Resource = TFJOBS) -> tuple[int, dict[str, Any]]:
        store = self.stores[res]
        errs = field_errors(body, res)
        meta = body.get("metadata") if isinstance(body, dict) else None
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        if errs:
            return 422, invalid_body(str(name), errs, res)
        if body["metadata"].get("namespace", ns) != ns:
            return 400, status_body(400, "BadRequest", "the namespace of the object does not match the request",
                                    res=res)
        obj = copy.deepcopy(body)
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), generation=1, creationTimestamp=_now(),
                               resourceVersion=str(self._version + 1))
        refused = self._too_large(obj)  # etcd refuses the request before its create-if-absent compare
        if refused:
            return refused
        if (ns, name) in store:
            return 409, status_body(409, "AlreadyExists", f'{res.plural}.{res.group} "{name}" already exists', name,
                                    res)
        self._bump(obj)
        store[(ns, name)] = obj
        return 201, copy.deepcopy(obj)
