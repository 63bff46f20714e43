"""A small fake of the Cloud Run Admin API v2 (REST) for ``jobs.run``, what ``landfall.arrival.cloudrun`` calls.

No Cloud Run can run on the test machines, so the wrapper (the official ``google-cloud-run`` client, REST
transport) is tested against this threaded ``http.server``, which answers as the real API does for:

- ``POST /v2/projects/P/locations/L/jobs/J:run`` with a ``RunJobRequest`` body
  (``{"overrides": {"containerOverrides": [{"env": [{"name", "value"}], ...}], "taskCount": N}}``, the
  client adds ``$alt=json;enum-encoding=int``): 200 with a long-running ``Operation``
  (``projects/P/locations/L/operations/UUID``, ``done: false``) whose ``metadata`` is the new
  ``google.cloud.run.v2.Execution`` (``@type``, ``name`` ``projects/P/locations/L/jobs/J/executions/J-xxxxx``,
  ``job``, ``taskCount``, ...). Every call starts a new execution: the API has no execution id to
  deduplicate on.
- an unknown job: 404 ``NOT_FOUND`` in Google's JSON error format (``{"error": {"code", "message", "status"}}``).
- ``fail_next(n, code)``: the next n requests answer ``code`` (429 ``RESOURCE_EXHAUSTED``, 503 ``UNAVAILABLE``).

``executions`` records each execution with its overrides; ``on_run`` (optional) is called with each new
execution, e.g. to start its tasks. Standard library only: fakes import no Landfall code.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from tests.fakes.http import JSONHandler, LoopbackServer

RUN_PATH = re.compile(r"^/v2/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/jobs/(?P<job>[^/:]+):run$")
STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
EXECUTION_TYPE = "type.googleapis.com/google.cloud.run.v2.Execution"


@dataclasses.dataclass
class Execution:
    name: str  # projects/P/locations/L/jobs/J/executions/J-xxxxx
    job: str  # projects/P/locations/L/jobs/J
    task_count: int
    env: dict[str, str]  # the container override's env, merged as Cloud Run merges it (later names win)
    overrides: dict[str, Any]  # the request's overrides as sent


def error_body(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": STATUS.get(code, "UNKNOWN")}}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class FakeCloudRun:
    def __init__(self, jobs: dict[str, int] | None = None, on_run: Callable[[Execution], None] | None = None):
        """``jobs``: job path (``projects/P/locations/L/jobs/J``) -> its declared task count."""
        self.jobs = dict(jobs or {})
        self.on_run = on_run
        self.executions: list[Execution] = []
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._failures: list[int] = []
        api = self

        class Handler(JSONHandler):
            content_type = "application/json; charset=UTF-8"

            def respond(self, method: str) -> None:
                try:
                    body = json.loads(self.body_bytes() or b"{}")
                except ValueError:
                    self.send_json(400, error_body(400, "Invalid JSON payload received."))
                    return
                self.send_json(*api.handle(method, urlparse(self.path).path, body))

        self.http = LoopbackServer(Handler)
        self.endpoint = f"http://{self.http.address}"

    def __enter__(self) -> FakeCloudRun:
        self.http.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.http.stop()

    # -- test controls -----------------------------------------------------------------------------------
    def add_job(self, project: str, location: str, job: str, task_count: int = 1) -> str:
        path = f"projects/{project}/locations/{location}/jobs/{job}"
        with self.lock:
            self.jobs[path] = task_count
        return path

    def fail_next(self, n: int, code: int = 503) -> None:
        with self.lock:
            self._failures += [code] * n

    # -- the API -------------------------------------------------------------------------------------------
    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append((method, path))
            if self._failures:
                code = self._failures.pop(0)
                return code, error_body(code, "The service is currently unavailable." if code >= 500
                                        else "Quota exceeded for quota metric 'Job run requests'.")
        m = RUN_PATH.match(path)
        if method != "POST" or not m:
            return 404, error_body(404, f"Requested entity was not found: {method} {path}")
        job = f"projects/{m['project']}/locations/{m['location']}/jobs/{m['job']}"
        with self.lock:
            declared = self.jobs.get(job)
        if declared is None:
            return 404, error_body(404, f"Resource '{m['job']}' of kind 'JOB' in region '{m['location']}' in "
                                        f"project '{m['project']}' does not exist.")
        overrides = body.get("overrides") or {}
        task_count = int(overrides.get("taskCount") or declared)
        if task_count < 1:
            return 400, error_body(400, "overrides.task_count must be at least 1")
        env: dict[str, str] = {}
        for container in overrides.get("containerOverrides") or []:
            for var in container.get("env") or []:
                env[var["name"]] = str(var.get("value", ""))
        name = f"{job}/executions/{m['job']}-{secrets.token_hex(3)[:5]}"
        execution = Execution(name, job, task_count, env, overrides)
        with self.lock:
            self.executions.append(execution)
        if self.on_run is not None:
            self.on_run(execution)
        now = _now()
        metadata = {"@type": EXECUTION_TYPE, "name": name, "uid": str(uuid.uuid4()), "generation": "1",
                    "createTime": now, "job": m["job"], "taskCount": task_count,
                    "parallelism": task_count, "reconciling": True}
        operation = f"projects/{m['project']}/locations/{m['location']}/operations/{uuid.uuid4()}"
        return 200, {"name": operation, "metadata": metadata, "done": False}
