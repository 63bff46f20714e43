"""A small fake Kubernetes API server for the TFJob collection (``kubeflow.org/v1``, ``tfjobs``).

No kube-apiserver can run on the test machines, so ``landfall.core.kube`` (the official client) is tested
against this threaded ``http.server`` that answers like the real one does for what Landfall uses:

- ``POST   .../namespaces/NS/tfjobs``: 201 with ``metadata.{uid,resourceVersion,generation,creationTimestamp}``;
  409 ``AlreadyExists`` Status for a taken name; 422 ``Invalid`` Status when the body breaks the TFJob
  schema (no ``spec.tfReplicaSpecs``, a replica without containers, a bad name or restart policy...).
- ``GET    .../tfjobs/NAME``: 200 or 404 ``NotFound`` Status.
- ``GET    .../tfjobs?labelSelector=k=v,k2!=v2``: a ``TFJobList``.
- ``PATCH  .../tfjobs/NAME`` (``application/merge-patch+json``): RFC 7386 merge; a ``metadata.resourceVersion``
  in the patch that is not the current one is a 409 ``Conflict``; the result is validated again (422).
- ``PATCH  .../tfjobs/NAME/status``: the status subresource (the tests play the training operator).
- ``DELETE .../tfjobs/NAME``: 200 or 404.
- ``fail_next(n, code)``: the next n requests answer ``code`` (429/503 for the temporary-failure tests).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_PATH = re.compile(r"^/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs(?:/([^/]+))?(/status)?/?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RESTART = ("Always", "OnFailure", "Never", "ExitCode")
_CLEAN = ("All", "Running", "None")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, name: str = "") -> dict[str, Any]:
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": reason, "details": {"name": name, "group": "kubeflow.org", "kind": "tfjobs"}, "code": code,
    }


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
    """The parts of the TFJob CRD's structural schema (and object-meta rules) Landfall can break."""
    errs: list[str] = []
    if not isinstance(obj, dict):
        return ["body: must be an object"]
    if obj.get("apiVersion") != "kubeflow.org/v1" or obj.get("kind") != "TFJob":
        errs.append("apiVersion/kind: must be kubeflow.org/v1 TFJob")
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if not isinstance(name, str) or not name or len(name) > 253 or not _DNS1123.match(name):
        errs.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of ...")
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            errs.append(f"metadata.{field}: values must be strings")
    for k, v in (meta.get("labels") or {}).items():
        if isinstance(v, str) and (len(v) > 63 or not re.match(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$", v)):
            errs.append(f"metadata.labels: Invalid value: {v!r} for {k}")
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


class FakeKubeAPI:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self._failures: list[int] = []
        self._version = 0
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"null")

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                body = self._body() if method in ("POST", "PATCH", "PUT") else None
                code, out = api.handle(method, url.path, parse_qs(url.query), body,
                                       self.headers.get("Content-Type", ""))
                self._send(code, out)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeKubeAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- test controls -----------------------------------------------------------------------------------
    def fail_next(self, n: int, code: int = 503) -> None:
        with self.lock:
            self._failures += [code] * n

    def set_condition(self, namespace: str, name: str, kind: str, reason: str = "", status: str = "True") -> None:
        """What the training operator does: append a condition (and the matching phase fields)."""
        with self.lock:
            obj = self.objects[(namespace, name)]
            st = obj.setdefault("status", {})
            conds = st.setdefault("conditions", [])
            for c in conds:
                if c["type"] in ("Running", "Restarting", "Created") and kind in ("Succeeded", "Failed"):
                    c["status"] = "False"
            conds.append({"type": kind, "status": status, "reason": reason or f"TFJob{kind}",
                          "message": f"TFJob {name} is {kind.lower()}.", "lastUpdateTime": _now(),
                          "lastTransitionTime": _now()})
            self._bump(obj)

    def names(self, namespace: str = "landfall-training") -> list[str]:
        with self.lock:
            return sorted(n for (ns, n) in self.objects if ns == namespace)

    # -- the API -----------------------------------------------------------------------------------------
    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any,
               content_type: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append((method, path))
            if self._failures:
                code = self._failures.pop(0)
                reason = "TooManyRequests" if code == 429 else "ServiceUnavailable"
                return code, status_body(code, reason, "injected failure")
            m = _PATH.match(path)
            if not m:
                return 404, status_body(404, "NotFound", f"the server could not find the requested resource {path}")
            ns, name, sub = m.group(1), m.group(2), m.group(3)
            if name is None:
                if method == "GET":
                    selector = (query.get("labelSelector") or [""])[0]
                    items = [copy.deepcopy(o) for (n, _), o in sorted(self.objects.items())
                             if n == ns and _selector_matches(selector, o["metadata"].get("labels") or {})]
                    return 200, {"apiVersion": "kubeflow.org/v1", "kind": "TFJobList",
                                 "metadata": {"resourceVersion": str(self._version)}, "items": items}
                if method == "POST":
                    return self._create(ns, body)
                return 405, status_body(405, "MethodNotAllowed", f"{method} is not allowed")
            key = (ns, name)
            if key not in self.objects:
                return 404, status_body(404, "NotFound", f'tfjobs.kubeflow.org "{name}" not found', name)
            obj = self.objects[key]
            if method == "GET":
                return 200, copy.deepcopy(obj)
            if method == "DELETE":
                del self.objects[key]
                return 200, status_body(200, "", "deleted", name) | {"status": "Success"}
            if method == "PATCH":
                if "merge-patch" not in content_type:
                    return 415, status_body(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
                want = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if want is not None and want != obj["metadata"]["resourceVersion"]:
                    return 409, status_body(
                        409, "Conflict", f'Operation cannot be fulfilled on tfjobs.kubeflow.org "{name}": the object '
                        "has been modified; please apply your changes to the latest version and try again", name)
                if sub:  # status subresource: only .status changes
                    new = copy.deepcopy(obj)
                    new["status"] = merge_patch(obj.get("status") or {}, (body or {}).get("status") or {})
                else:
                    patch = copy.deepcopy(body or {})
                    patch.pop("status", None)
                    for frozen in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
                        (patch.get("metadata") or {}).pop(frozen, None)
                    new = merge_patch(obj, patch)
                    if new.get("spec") != obj.get("spec"):
                        new["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
                errs = validate(new)
                if errs:
                    msg = f'TFJob.kubeflow.org "{name}" is invalid: ' + "; ".join(errs)
                    return 422, status_body(422, "Invalid", msg, name)
                self._bump(new)
                self.objects[key] = new
                return 200, copy.deepcopy(new)
            return 405, status_body(405, "MethodNotAllowed", f"{method} is not allowed")

    def _create(self, ns: str, body: Any) -> tuple[int, dict[str, Any]]:
        errs = validate(body)
        name = (body or {}).get("metadata", {}).get("name", "") if isinstance(body, dict) else ""
        if errs:
            return 422, status_body(422, "Invalid", f'TFJob.kubeflow.org "{name}" is invalid: ' + "; ".join(errs), name)
        if body["metadata"].get("namespace", ns) != ns:
            return 400, status_body(400, "BadRequest", "the namespace of the object does not match the request")
        if (ns, name) in self.objects:
            return 409, status_body(409, "AlreadyExists", f'tfjobs.kubeflow.org "{name}" already exists', name)
        obj = copy.deepcopy(body)
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), generation=1, creationTimestamp=_now())
        self._bump(obj)
        self.objects[(ns, name)] = obj
        return 201, copy.deepcopy(obj)
