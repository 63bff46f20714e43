"""The one module that talks to Cloud Run's Admin API (``google-cloud-run``): start one execution of a job. It lives in
the arrival stage, its one user (the SDK contract in pyproject.toml names it beside ``core.services``).

``CloudRunJobs(project, region).run(job, task_count, env)`` calls ``JobsClient.run_job`` with
``RunJobRequest.Overrides`` (``task_count``, and one container override carrying ``env``, which Cloud Run
merges into the container's own) and returns the new execution's name
(``projects/P/locations/L/jobs/J/executions/J-xxxxx``, from the operation's ``Execution`` metadata) without
waiting for it to finish. ``RunJobRequest`` has no execution id: every call starts a new execution, so
callers that must start one per event guard it themselves (``landfall.arrival.route``).

``endpoint`` (``LANDFALL_CLOUD_RUN_ENDPOINT``, e.g. ``http://127.0.0.1:PORT``) points the client at another
server over REST with anonymous credentials: the tests' fake (``tests/fakes/cloud_run.py``).

``LocalJobs`` plays Cloud Run on one machine (``landfall up``): ``run`` records the execution as
``<state>/cloudrun/executions/<execution>.json`` and the local operator (``landfall.local.executions``) starts
its tasks as processes.

Errors keep their retry class: 404 -> ``NotFound``; 409 -> ``AlreadyExists``; 429, 5xx, deadlines and
transport errors (also while fetching a token) -> ``TemporaryError``; anything else the API refuses (400,
401, 403) -> ``PermanentError``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials

from landfall.core.errors import AccessDenied, AlreadyExists, LandfallError, PermanentError, TemporaryError
from landfall.core.services import google_api

if TYPE_CHECKING:
    from google.cloud import run_v2

RUN_TIMEOUT_S = 60.0


def job_path(project: str, region: str, job: str) -> str:
    """``job`` as the API names it: a short name, or already ``projects/P/locations/L/jobs/J``."""
    return job if job.startswith("projects/") else f"projects/{project}/locations/{region}/jobs/{job}"


@contextlib.contextmanager
def mapped_errors(what: str) -> Iterator[None]:
    try:
        with google_api.mapped_errors(what, "Cloud Run"):
            yield
    except AccessDenied as exc:  # Cloud Run's own class for a refusal; its caller (route) retries it anyway
        raise PermanentError(f"{what}: Cloud Run refused: {exc}") from exc
    except LandfallError:
        raise
    except gexc.GoogleAPICallError as exc:  # 400, 401, 403 ...: retrying the same call cannot help
        raise PermanentError(f"{what}: Cloud Run refused: {exc}") from exc
    except Exception as exc:
        if google_api.is_transient(exc):
            raise TemporaryError(f"{what}: Cloud Run unreachable: {exc}") from exc
        raise


class CloudRunJobs:
    """``google.cloud.run_v2`` is imported on first use: only large arrivals need it (cold starts stay small)."""

    def __init__(self, project: str, region: str, endpoint: str | None = None, client: Any = None):
        self.project = project
        self.region = region
        self.endpoint = endpoint or None
        self._client = client

    @property
    def client(self) -> run_v2.JobsClient:
        from google.cloud import run_v2

        if self._client is None:
            if self.endpoint:
                self._client = run_v2.JobsClient(transport="rest", credentials=AnonymousCredentials(),
                                                 client_options=ClientOptions(api_endpoint=self.endpoint))
            else:
                self._client = run_v2.JobsClient()
        return self._client

    def run(self, job: str, task_count: int, env: dict[str, str]) -> str:
        """Starts one execution of ``job`` with ``task_count`` tasks and ``env`` added; returns its name."""
        from google.cloud import run_v2

        path = job_path(self.project, self.region, job)
        overrides = run_v2.RunJobRequest.Overrides(
            task_count=task_count,
            container_overrides=[run_v2.RunJobRequest.Overrides.ContainerOverride(
                env=[run_v2.EnvVar(name=k, value=v) for k, v in sorted(env.items())])],
        )
        with mapped_errors(path):
            operation = self.client.run_job(request=run_v2.RunJobRequest(name=path, overrides=overrides),
                                            timeout=RUN_TIMEOUT_S)
            execution = operation.metadata
            name = getattr(execution, "name", "") if execution is not None else ""
        return name or operation.operation.name


class LocalJobs:
    """Cloud Run on one machine: records each execution for the local operator to run (``landfall up``)."""

    def __init__(self, state_dir: str | os.PathLike[str], project: str = "local", region: str = "local"):
        self.root = Path(state_dir)
        self.project = project
        self.region = region

    @property
    def dir(self) -> Path:
        return self.root / "cloudrun" / "executions"

    def run(self, job: str, task_count: int, env: dict[str, str]) -> str:
        path = job_path(self.project, self.region, job)
        short = path.rsplit("/", 1)[-1]
        execution = f"{short}-{uuid.uuid4().hex[:5]}"
        record = {"name": f"{path}/executions/{execution}", "job": path, "task_count": task_count,
                  "env": dict(env), "created_at": time.time()}
        self.dir.mkdir(parents=True, exist_ok=True)
        target = self.dir / f"{execution}.json"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(json.dumps(record, indent=2))
        try:
            os.link(tmp, target)  # create-only, whole: the operator never reads half a record
        except FileExistsError:
            raise AlreadyExists(f"{target}: already exists") from None
        finally:
            tmp.unlink()
        return record["name"]
