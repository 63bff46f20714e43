"""The ``local`` backend: the TFJob (or JobSet) API of a cluster, as files in a state folder (the embedded default).

Like a cluster it splits API and controller: ``LocalBackend`` only records TFJob objects, and the local
operator (``landfall operator --state DIR``, ``landfall.local.tfjob_controller``) picks them up and runs them. The
submit function therefore never runs training inside its own request.

Layout of the state folder (``LANDFALL_LOCAL_STATE``, default ``./.landfall/local``)::

    tfjobs/<namespace>/<name>.json        the TFJob object, ``status`` included (``jobsets/`` for JobSets)
    tfjobs/<namespace>/.<name>.lock       flock taken for every update (read-modify-write)
    logs/<name>/worker-<i>.log            each replica's stdout+stderr, every attempt appended
    operator.pid                          the running operator (``landfall up`` and the tests read it)

Semantics, as the API server's:

- ``create``: create-if-absent, atomic (a hard link of a complete temporary file, so a reader never sees
  half an object); a taken name raises ``AlreadyExists``. ``metadata.uid``, ``resourceVersion``,
  ``generation`` and ``creationTimestamp`` are set. A body without ``spec.tfReplicaSpecs`` (a JobSet
  without ``spec.replicatedJobs``), of another kind, or with a bad name raises ``Invalid``, as the CRD's
  schema would.
- ``patch``: an RFC 7386 merge patch under the object's lock; a ``metadata.resourceVersion`` in the
  patch that is not the current one raises ``Conflict``. ``patch_status`` is the status
  subresource (the operator's).
- ``list(dataset=None)``: the TFJobs managed by Landfall, optionally of one dataset, each with
  ``status.conditions`` (``Created``, ``Running``, ``Restarting``, ``Succeeded``, ``Failed``,
  ``Suspended``), oldest first. The demo calls ``LocalBackend(state_dir).list()`` to show jobs, and
  ``landfall.submit.engine.state(job)`` gives the one-word state (either kind).
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from landfall.core.errors import AlreadyExists, Conflict, Invalid, NotFound
from landfall.submit import engine, jobmeta, jobset
from landfall.submit.config import JobConfig

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def k8s_time(ts: float | None = None) -> str:
    """RFC 3339 UTC, with microseconds (the API server's MicroTime) so events in one second order."""
    dt = datetime.fromtimestamp(ts, UTC) if ts is not None else datetime.now(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def _check(job: Any, api: engine.Api) -> None:
    if not isinstance(job, dict) or job.get("kind") != api.kind or job.get("apiVersion") != api.api_version:
        raise Invalid(f"{api.kind} is invalid: apiVersion/kind must be {api.api_version} {api.kind}")
    name = (job.get("metadata") or {}).get("name", "")
    if not isinstance(name, str) or not _DNS1123.match(name) or len(name) > 253:
        raise Invalid(f"{api.kind} is invalid: metadata.name {name!r} is not a DNS-1123 subdomain")
    if api.kind == jobset.KIND:
        rjobs = (job.get("spec") or {}).get("replicatedJobs")
        if not isinstance(rjobs, list) or not rjobs:
            raise Invalid(f'JobSet "{name}" is invalid: spec.replicatedJobs: Required value')
        for i, rj in enumerate(rjobs):
            pod = ((((rj or {}).get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            if not isinstance(pod.get("containers"), list) or not pod["containers"]:
                raise Invalid(f'JobSet "{name}" is invalid: spec.replicatedJobs[{i}].template.spec.template.spec'
                              ".containers: Required value")
        return
    specs = (job.get("spec") or {}).get("tfReplicaSpecs")
    if not isinstance(specs, dict) or not specs:
        raise Invalid(f'TFJob "{name}" is invalid: spec.tfReplicaSpecs: Required value')
    for kind, rs in specs.items():
        containers = (((rs or {}).get("template") or {}).get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            raise Invalid(f'TFJob "{name}" is invalid: spec.tfReplicaSpecs.{kind}.template.spec.containers: Required')


class LocalBackend:
    def __init__(self, state_dir: str | os.PathLike[str], namespace: str = "landfall-training",
                 engine_name: str = "tfjob"):
        self.root = Path(state_dir)
        self.namespace = namespace
        self.engine = engine_name
        self.api = engine.api(engine_name)
        self.dir = self.root / self.api.plural / namespace
        self.dir.mkdir(parents=True, exist_ok=True)

    # -- paths ----------------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def log_path(self, name: str, index: int, replica: str = "worker") -> Path:
        return self.root / "logs" / name / f"{replica}-{index}.log"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        with open(self.dir / f".{name}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _write(self, name: str, obj: dict[str, Any]) -> None:
        tmp = self.dir / f".{name}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(obj, indent=1, sort_keys=True))
        os.replace(tmp, self.path(name))

    @staticmethod
    def _next_version(obj: dict[str, Any]) -> str:
        return str(int(obj["metadata"].get("resourceVersion") or 0) + 1)

    # -- the API --------------------------------------------------------------------------------------
    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        _check(job, self.api)
        obj = copy.deepcopy(job)
        name = jobmeta.name_of(obj)
        meta = obj["metadata"]
        if meta.get("namespace", self.namespace) != self.namespace:
            raise Invalid(f"{self.api.kind} {name}: namespace {meta['namespace']!r} is not {self.namespace!r}")
        meta.update(namespace=self.namespace, uid=str(uuid.uuid4()), resourceVersion="1", generation=1,
                    creationTimestamp=k8s_time())
        obj.pop("status", None)
        tmp = self.dir / f".{name}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(obj, indent=1, sort_keys=True))
        try:
            os.link(tmp, self.path(name))  # atomic create-if-absent
        except FileExistsError:
            raise AlreadyExists(f'{self.api.plural} "{name}" already exists') from None
        finally:
            tmp.unlink()
        return obj

    def get(self, name: str) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path(name).read_text()))
        except FileNotFoundError:
            raise NotFound(f'{self.api.plural} "{name}" not found') from None

    def list(self, dataset: str | None = None) -> list[dict[str, Any]]:
        out = []
        for p in self.dir.glob("*.json"):
            try:
                job = json.loads(p.read_text())
            except (FileNotFoundError, ValueError):
                continue
            labels = job.get("metadata", {}).get("labels") or {}
            if labels.get("app.kubernetes.io/managed-by") != "landfall":
                continue
            if dataset is not None and labels.get(jobmeta.DATASET_LABEL) != jobmeta.label_value(dataset):
                continue
            out.append(job)
        return sorted(out, key=lambda j: (jobmeta.created_at(j), jobmeta.name_of(j)))

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        patch = copy.deepcopy(patch)
        patch.pop("status", None)
        meta = patch.get("metadata") or {}
        want = meta.pop("resourceVersion", None)
        for frozen in ("name", "namespace", "uid", "creationTimestamp"):
            meta.pop(frozen, None)
        return self._update(name, want, lambda obj: merge_patch(obj, patch))

    def patch_status(self, name: str, status: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
        return self._update(name, resource_version,
                            lambda obj: {**obj, "status": merge_patch(obj.get("status") or {}, status)})

    def _update(self, name: str, want: str | None, change: Any) -> dict[str, Any]:
        with self._locked(name):
            obj = self.get(name)
            if want is not None and want != obj["metadata"].get("resourceVersion"):
                raise Conflict(f'{self.api.plural} "{name}": the object has been modified; apply your changes to '
                               "the latest version and try again")
            new = change(obj)
            _check(new, self.api)
            if new.get("spec") != obj.get("spec"):
                new["metadata"]["generation"] = int(obj["metadata"].get("generation") or 1) + 1
            new["metadata"]["resourceVersion"] = self._next_version(obj)
            self._write(name, new)
            return dict(new)

    def delete(self, name: str) -> None:
        with self._locked(name), contextlib.suppress(FileNotFoundError):
            self.path(name).unlink()


def connect(cfg: JobConfig) -> LocalBackend:
    """The engine's objects in the configured state folder (``open_backend``)."""
    return LocalBackend(cfg.local_state, namespace=cfg.namespace, engine_name=cfg.engine)
