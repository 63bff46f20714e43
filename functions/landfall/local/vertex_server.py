"""Vertex AI's JobService on one machine: the ``customJobs`` REST API that Google's own client
(``google-cloud-aiplatform``'s ``JobServiceClient``, REST transport) calls, answering and failing as the service
does, by its published rules written down here as data with their sources (read 2026-12-05).

What it enforces (``RULES``):
- every CustomJob parses strictly as the client's own message (a field the API lacks, a value of the wrong type:
  400 ``INVALID_ARGUMENT`` with the parser's words);
- the required fields (``REQUIRED``), a primary pool of exactly one replica, each pool's image;
- the machine and accelerator pairs (``ACCELERATOR_MACHINES``: which machine series each GPU attaches to, and how
  many per machine);
- the label rules (``LABELS``);
- the region's GPU quota per accelerator (``quota``; past it, 429 ``RESOURCE_EXHAUSTED`` as the service answers a
  create over ``custom_model_training_<accelerator>_gpus``), and the caller's permission (``denied``: 403
  ``PERMISSION_DENIED`` for ``aiplatform.customJobs.create``);
- the job states and the moves between them (``TRANSITIONS``): a job is created ``JOB_STATE_QUEUED``; ``advance``
  moves it (the runner of its replicas does, or a test); ``:cancel`` moves a job that has not ended to
  ``JOB_STATE_CANCELLING`` and then ``JOB_STATE_CANCELLED``; ``DELETE`` refuses a job that has not ended
  (400 ``FAILED_PRECONDITION``).
- ``list`` with the API's filter for what Landfall asks (``labels.KEY="VALUE"`` and ``display_name="NAME"`` terms
  joined by ``AND``); any other filter is refused (400), so a query the fake cannot answer is never answered wrong.

**Running the replicas** (``replicas_dir`` set, as ``landfall up`` runs it): each job the service would start is
moved ``QUEUED`` -> ``PENDING`` -> ``RUNNING`` and each replica of each pool runs as a local process (the
container's command and arguments, its environment, and what Vertex AI adds: ``TF_CONFIG`` with pool 0 as
``chief`` and pool 1 as ``worker`` (``landfall.submit.vertex.tf_config``), ``CLUSTER_SPEC`` with the pools by name,
``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR`` and ``AIP_TENSORBOARD_LOG_DIR`` under the job's ``baseOutputDirectory``).
The primary replica reports for the job as a whole (DOCS["pools"]): its exit 0 ends the job ``SUCCEEDED`` (the
others are stopped); any replica's non-zero exit ends it ``FAILED`` with the service's message ("The replica
workerpool1-0 exited with a non-zero status of 1"); past ``scheduling.timeout`` it ends ``FAILED``; ``:cancel``
stops its replicas. **A worker restart** (``preempt``: a Spot VM reclaimed or a VM lost, which the service
restarts rather than fails): the replica's processes get SIGTERM, and SIGKILL after ``PREEMPTION_NOTICE_S``
(Compute Engine's notice, DOCS["preemption"]); once it is gone the service restarts it, and with
``scheduling.restartJobOnWorkerRestart`` every replica of the job (DOCS["scheduling"]); ``restarts_of`` counts them.
Each replica's output is in ``replicas_dir/<job id>/workerpool<P>-<I>.log``.

What it cannot do: bill, provision real machines, honour ``maxWaitDuration`` by the clock of real capacity, or
answer filters beyond the subset above.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import subprocess
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, unquote, urlparse

from landfall.core.rules import timestamps
from landfall.local import leash
from landfall.local.emulators import free_ports
from landfall.local.tfjob_controller import command_of
from landfall.submit import vertex
from landfall.submit.backends.aiplatform import as_dict, parse_custom_job

DOCS = {
    "pools": "https://cloud.google.com/vertex-ai/docs/training/distributed-training (read 2026-12-05: the primary "
             "replica reports status for the job as a whole; CLUSTER_SPEC and TF_CONFIG)",
    "env": "https://cloud.google.com/vertex-ai/docs/training/code-requirements#environment-variables "
           "(read 2026-12-05: AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR)",
    "rest": "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.customJobs (read 2026-12-05)",
    "compute": "https://cloud.google.com/vertex-ai/docs/training/configure-compute (read 2026-12-05)",
    "labels": "https://cloud.google.com/vertex-ai/docs/general/resource-labels (read 2026-12-05)",
    "states": "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/JobState (read 2026-12-05)",
    "quotas": "https://cloud.google.com/vertex-ai/docs/quotas#serverless-training (read 2026-12-05)",
    "preemption": "https://cloud.google.com/compute/docs/instances/spot#preemption-process (read 2026-12-05: "
                  "30 s from the ACPI G2 soft off to the hard stop)",
    "scheduling": "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec#Scheduling "
                  "(read 2026-12-05: restartJobOnWorkerRestart restarts the entire CustomJob if a worker is restarted)",
    "errors": "https://cloud.google.com/apis/design/errors#handling_errors (read 2026-12-05)",
}

# Required by the REST reference (DOCS["rest"]): CustomJob.displayName, CustomJob.jobSpec,
# CustomJobSpec.workerPoolSpecs; each WorkerPoolSpec's machineSpec.machineType and a container or a Python package.
REQUIRED = ("displayName", "jobSpec", "jobSpec.workerPoolSpecs")
# The GPUs each machine series takes, and how many per machine (DOCS["compute"]).
ACCELERATOR_MACHINES = {
    "NVIDIA_L4": ("g2-standard-", (1, 2, 4, 8)),
    "NVIDIA_TESLA_T4": ("n1-", (1, 2, 4)),
    "NVIDIA_TESLA_V100": ("n1-", (1, 2, 4, 8)),
    "NVIDIA_TESLA_A100": ("a2-highgpu-", (1, 2, 4, 8, 16)),
    "NVIDIA_A100_80GB": ("a2-ultragpu-", (1, 2, 4, 8)),
    "NVIDIA_H100_80GB": ("a3-highgpu-", (1, 2, 4, 8)),
}
LABELS = {"max": 64, "key": re.compile(r"^[a-z][a-z0-9_-]{0,62}$"), "value": re.compile(r"^[a-z0-9_-]{0,63}$")}
# The states a CustomJob moves through, and the moves the service makes (DOCS["states"]).
TRANSITIONS = {
    "JOB_STATE_QUEUED": ("JOB_STATE_PENDING", "JOB_STATE_FAILED", "JOB_STATE_CANCELLING"),
    "JOB_STATE_PENDING": ("JOB_STATE_RUNNING", "JOB_STATE_FAILED", "JOB_STATE_CANCELLING"),
    "JOB_STATE_RUNNING": ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLING"),
    "JOB_STATE_CANCELLING": ("JOB_STATE_CANCELLED",),
}
ENDED = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
PREEMPTION_NOTICE_S = 30.0
# Google's error statuses (DOCS["errors"]): HTTP code, the canonical status.
STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
          429: "RESOURCE_EXHAUSTED", 412: "FAILED_PRECONDITION"}
_TERM = re.compile(r'^\s*(labels\.([a-z][a-z0-9_-]*)|display_name)\s*=\s*"([^"]*)"\s*$')


class ApiError(Exception):
    def __init__(self, code: int, message: str, status: str | None = None):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status or STATUS.get(code, "UNKNOWN")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _field(doc: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None  # type: ignore[assignment]
    return doc


def check(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the service would store it, or the ``ApiError`` it answers (the module docstring's rules)."""
    try:
        job = as_dict(parse_custom_job(body))
    except ValueError as exc:
        raise ApiError(400, f"Invalid JSON payload received. {exc}") from None
    for path in REQUIRED:
        if not _field(job, path):
            raise ApiError(400, f"{path} is required")
    pools = job["jobSpec"]["workerPoolSpecs"]
    if int(pools[0].get("replicaCount") or 0) != 1:
        raise ApiError(400, "workerPoolSpecs[0].replicaCount must be 1: the first pool is the primary replica")
    for i, pool in enumerate(pools):
        if not pool:
            continue  # an empty pool spec is allowed between used ones
        machine = (pool.get("machineSpec") or {}).get("machineType")
        if not machine:
            raise ApiError(400, f"workerPoolSpecs[{i}].machineSpec.machineType is required")
        if not (pool.get("containerSpec") or {}).get("imageUri") and not pool.get("pythonPackageSpec"):
            raise ApiError(400, f"workerPoolSpecs[{i}]: a containerSpec.imageUri or a pythonPackageSpec is required")
        kind = pool["machineSpec"].get("acceleratorType")
        if kind and kind != "ACCELERATOR_TYPE_UNSPECIFIED":
            series, counts = ACCELERATOR_MACHINES.get(kind, (None, ()))
            count = int(pool["machineSpec"].get("acceleratorCount") or 0)
            if series is None or not machine.startswith(series) or count not in counts:
                raise ApiError(400, f"workerPoolSpecs[{i}]: {count} x {kind} cannot attach to {machine}")
    labels = job.get("labels") or {}
    if len(labels) > LABELS["max"] or any(not LABELS["key"].match(k) or not LABELS["value"].match(v)
                                          for k, v in labels.items()):
        raise ApiError(400, f"labels {labels}: keys and values of at most 63 lower-case letters, digits, _ and -")
    return job


def gpus_by_kind(job: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for pool in job["jobSpec"]["workerPoolSpecs"]:
        spec = (pool or {}).get("machineSpec") or {}
        if spec.get("acceleratorType"):
            out[spec["acceleratorType"]] = (out.get(spec["acceleratorType"], 0)
                                            + int(spec.get("acceleratorCount") or 0) * int(pool["replicaCount"]))
    return out


@dataclasses.dataclass
class Replica:
    pool: int
    index: int
    proc: subprocess.Popen[bytes]
    log: TextIO
    log_path: Path


@dataclasses.dataclass
class VertexServer:
    """The fake JobService. ``quota``: GPUs per accelerator type the region grants (absent: unlimited);
    ``denied``: refuse every create with 403 (a missing ``aiplatform.customJobs.create``)."""

    quota: dict[str, int] = dataclasses.field(default_factory=dict)
    denied: bool = False
    replicas_dir: Path | None = None  # set: run each job's replicas as local processes, their logs here
    port: int = 0  # 0: any free port
    env: dict[str, str] = dataclasses.field(default_factory=lambda: dict(os.environ))  # what every replica inherits
    poll_s: float = 0.2
    jobs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    _ids: Any = dataclasses.field(default_factory=lambda: itertools.count(1000))
    _lock: threading.RLock = dataclasses.field(default_factory=threading.RLock)
    _httpd: ThreadingHTTPServer | None = None
    _running: dict[str, list[Replica]] = dataclasses.field(default_factory=dict)
    _preempted: set[tuple[str, int, int]] = dataclasses.field(default_factory=set)
    _restarts: dict[str, int] = dataclasses.field(default_factory=dict)
    _stopping: threading.Event = dataclasses.field(default_factory=threading.Event)

    # -- the service's operations ----------------------------------------------------------------------------
    def create(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.denied:
            raise ApiError(403, f"Permission 'aiplatform.customJobs.create' denied on resource '{parent}'")
        job = check(body)
        with self._lock:
            for kind, wanted in gpus_by_kind(job).items():
                held = sum(gpus_by_kind(j).get(kind, 0) for j in self.jobs.values() if j["state"] not in ENDED)
                limit = self.quota.get(kind)
                if limit is not None and held + wanted > limit:
                    metric = f"aiplatform.googleapis.com/custom_model_training_{kind.lower()}_gpus"
                    raise ApiError(429, f"Quota exceeded for quota metric '{metric}': {held} of {limit} in use, "
                                        f"{wanted} asked")
            name = f"{parent}/customJobs/{next(self._ids)}"
            stamp = _now()
            job.update(name=name, state="JOB_STATE_QUEUED", createTime=stamp, updateTime=stamp)
            self.jobs[name] = job
            return dict(job)

    def get(self, name: str) -> dict[str, Any]:
        with self._lock:
            if name not in self.jobs:
                raise ApiError(404, f"The CustomJob does not exist: {name}")
            return dict(self.jobs[name])

    def list(self, parent: str, filter_: str = "") -> list[dict[str, Any]]:
        terms = [t for t in re.split(r"\s+AND\s+", filter_.strip()) if t.strip()] if filter_.strip() else []
        wanted = []
        for term in terms:
            m = _TERM.match(term)
            if m is None:
                raise ApiError(400, f"Unsupported filter term {term!r} (this stand-in answers labels.KEY=\"V\" and "
                                    "display_name=\"N\" joined by AND)")
            wanted.append((m.group(2), m.group(3)))
        with self._lock:
            return [dict(j) for n, j in sorted(self.jobs.items()) if n.startswith(parent + "/customJobs/")
                    and all((j.get("labels") or {}).get(k) == v if k else j.get("displayName") == v
                            for k, v in wanted)]

    def advance(self, name: str, state: str, error: str | None = None) -> dict[str, Any]:
        """Moves job ``name`` to ``state`` as the service would (``TRANSITIONS``); ``ValueError`` for a move it
        never makes. ``error``: the message of a failed job."""
        with self._lock:
            job = self.jobs[name]
            if state not in TRANSITIONS.get(job["state"], ()):
                raise ValueError(f"{name}: {job['state']} never moves to {state}")
            job.update(state=state, updateTime=_now())
            if state == "JOB_STATE_RUNNING":
                job.setdefault("startTime", job["updateTime"])
            if state in ENDED:
                job["endTime"] = job["updateTime"]
            if error:
                job["error"] = {"code": 13, "message": error}
            return dict(job)

    def cancel(self, name: str) -> None:
        job = self.get(name)
        if job["state"] in ENDED:
            raise ApiError(400, f"CustomJob {name} has ended ({job['state']}): it cannot be cancelled",
                           "FAILED_PRECONDITION")
        if job["state"] != "JOB_STATE_CANCELLING":
            self.advance(name, "JOB_STATE_CANCELLING")
        self._stop_replicas(name)
        self.advance(name, "JOB_STATE_CANCELLED")

    def delete(self, name: str) -> dict[str, Any]:
        job = self.get(name)
        if job["state"] not in ENDED:
            raise ApiError(400, f"CustomJob {name} is {job['state']}: cancel it before deleting it",
                           "FAILED_PRECONDITION")
        with self._lock:
            del self.jobs[name]
        return {"name": f"{name}/operations/{next(self._ids)}", "done": True,
                "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}

    # -- the replicas, run here ------------------------------------------------------------------------------
    def _spawn(self, name: str, job: dict[str, Any]) -> list[Replica]:
        pools = [p for p in job["jobSpec"]["workerPoolSpecs"]]
        counts = [int(p.get("replicaCount") or 0) if p else 0 for p in pools]
        ports = free_ports(sum(counts))
        addresses, at = [], 0
        for n in counts:
            addresses.append([f"127.0.0.1:{port}" for port in ports[at:at + n]])
            at += n
        cluster_spec = {"cluster": {f"workerpool{i}": a for i, a in enumerate(addresses) if a},
                        "environment": "cloud"}
        output = ((job["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
        folder = Path(self.replicas_dir or ".") / name.rsplit("/", 1)[-1]
        folder.mkdir(parents=True, exist_ok=True)
        replicas = []
        for pool, spec in enumerate(pools):
            for index in range(counts[pool]):
                container = spec["containerSpec"]
                env = {**self.env, **{e["name"]: str(e.get("value", "")) for e in container.get("env") or []},
                       "TF_CONFIG": vertex.tf_config(addresses, pool, index),
                       "CLUSTER_SPEC": json.dumps({**cluster_spec, "task": {"type": f"workerpool{pool}",
                                                                            "index": index}})}
                if output:
                    env.update(AIP_MODEL_DIR=f"{output}/model", AIP_CHECKPOINT_DIR=f"{output}/checkpoints",
                               AIP_TENSORBOARD_LOG_DIR=f"{output}/logs")
                command = command_of({"command": container.get("command") or ["python"],
                                      "args": container.get("args") or []})
                path = folder / f"workerpool{pool}-{index}.log"
                log = open(path, "a")  # noqa: SIM115 (kept open while the replica runs)
                proc = leash.popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                replicas.append(Replica(pool, index, proc, log, path))
        return replicas

    def preempt(self, name: str, pool: int, index: int, notice_s: float = PREEMPTION_NOTICE_S) -> None:
        """Replica ``pool``/``index`` of job ``name`` loses its VM, as a reclaimed Spot VM does: SIGTERM to its
        processes now, SIGKILL ``notice_s`` later; the service then restarts it (the module docstring)."""
        replica = next(r for r in self._running[name] if (r.pool, r.index) == (pool, index))
        self._preempted.add((name, pool, index))
        threading.Thread(target=leash.stop_group, args=(replica.proc, notice_s), daemon=True).start()

    def restarts_of(self, name: str) -> int:
        """How many times the service restarted job ``name``'s replicas after a worker restart."""
        return self._restarts.get(name, 0)

    def replicas_of(self, name: str) -> list[Replica]:
        """The replicas of job ``name`` running here now (none once it has ended)."""
        return list(self._running.get(name, []))

    def _stop_replicas(self, name: str) -> None:
        for r in self._running.pop(name, []):
            leash.stop_group(r.proc)
            with contextlib.suppress(OSError):
                r.log.close()

    def tick(self) -> None:
        """One pass of the replica runner: starts queued jobs' replicas, ends jobs whose replicas ended."""
        self._tick()

    def _tick(self) -> None:
        with self._lock:
            names = [n for n, j in self.jobs.items() if j["state"] in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING")]
        for name in names:
            job = self.jobs.get(name)
            if job is None:
                continue
            if job["state"] == "JOB_STATE_QUEUED":
                self.advance(name, "JOB_STATE_PENDING")
                self._running[name] = self._spawn(name, job)
                self.advance(name, "JOB_STATE_RUNNING")
                continue
            replicas = self._running.get(name)
            if replicas is None:
                continue  # run elsewhere (a test moves it)
            lost = [r for r in replicas if (name, r.pool, r.index) in self._preempted and r.proc.poll() is not None]
            if lost:
                self._restart(name, job, lost)
                continue
            if any((name, r.pool, r.index) in self._preempted for r in replicas):
                continue  # a VM going away: its replica has not stopped yet
            ended = self._outcome(job, replicas)
            if ended is not None:
                self._stop_replicas(name)
                self.advance(name, *ended)

    def _restart(self, name: str, job: dict[str, Any], lost: list[Replica]) -> None:
        """The service restarts a lost worker; with ``restartJobOnWorkerRestart``, every replica of the job."""
        for r in lost:
            self._preempted.discard((name, r.pool, r.index))
        whole = bool((job["jobSpec"].get("scheduling") or {}).get("restartJobOnWorkerRestart"))
        if not whole:
            raise ApiError(501, "this stand-in restarts whole jobs only (restartJobOnWorkerRestart: true)")
        self._stop_replicas(name)
        self._preempted = {p for p in self._preempted if p[0] != name}
        self._restarts[name] = self._restarts.get(name, 0) + 1
        self._running[name] = self._spawn(name, job)

    @staticmethod
    def _outcome(job: dict[str, Any], replicas: list[Replica]) -> tuple[str, str | None] | None:
        """How the job ends now, or None while it runs (the module docstring)."""
        for r in replicas:
            code = r.proc.poll()
            if code not in (None, 0):
                return "JOB_STATE_FAILED", (f"The replica workerpool{r.pool}-{r.index} exited with a non-zero "
                                            f"status of {code}.")
        primary = replicas[0]
        if primary.proc.poll() == 0:
            return "JOB_STATE_SUCCEEDED", None
        timeout = str((job["jobSpec"].get("scheduling") or {}).get("timeout") or "").removesuffix("s")
        started = timestamps.epoch(job.get("startTime"))
        if timeout and started is not None and time.time() - started > float(timeout):
            return "JOB_STATE_FAILED", f"Job exceeded its timeout of {timeout} s."
        return None

    def _loop(self) -> None:
        while not self._stopping.wait(self.poll_s):
            try:
                self._tick()
            except Exception:
                import logging

                logging.getLogger("landfall.local.vertex_server").exception("the replica runner's tick failed")

    # -- HTTP ------------------------------------------------------------------------------------------------
    def start(self) -> VertexServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                path = unquote(url.path).removeprefix("/v1/")
                try:
                    if method == "POST" and path.endswith("/customJobs"):
                        try:
                            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                        except ValueError as exc:
                            raise ApiError(400, f"Invalid JSON payload received. {exc}") from None
                        if not isinstance(body, dict):
                            raise ApiError(400, "Invalid JSON payload received. A CustomJob is an object.")
                        self._send(200, server.create(path.removesuffix("/customJobs"), body))
                    elif method == "POST" and path.endswith(":cancel"):
                        server.cancel(path.removesuffix(":cancel"))
                        self._send(200, {})
                    elif method == "GET" and path.endswith("/customJobs"):
                        query = parse_qs(url.query)
                        jobs = server.list(path.removesuffix("/customJobs"), (query.get("filter") or [""])[0])
                        self._send(200, {"customJobs": jobs, "nextPageToken": ""})
                    elif method == "GET" and "/customJobs/" in path:
                        self._send(200, server.get(path))
                    elif method == "DELETE" and "/customJobs/" in path:
                        self._send(200, server.delete(path))
                    else:
                        raise ApiError(404, f"{method} {url.path}: no such method")
                except ApiError as exc:
                    self._send(exc.code, {"error": {"code": exc.code, "message": exc.message,
                                                    "status": exc.status}})

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True, name="vertex-server").start()
        if self.replicas_dir is not None:
            threading.Thread(target=self._loop, daemon=True, name="vertex-replicas").start()
        return self

    @property
    def url(self) -> str:
        assert self._httpd is not None, "not started"
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def stop(self) -> None:
        self._stopping.set()
        for name in list(self._running):
            self._stop_replicas(name)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
