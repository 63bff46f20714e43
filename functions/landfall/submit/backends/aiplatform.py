"""Vertex AI custom jobs through Google's own client (``google-cloud-aiplatform``'s ``aiplatform_v1``
``JobServiceClient``, its REST transport), with plain dicts in and out (the REST API's JSON, camelCase) and the one
error mapping of ``core.services.google_api`` (404 ``NotFound``; 429 quota and 5xx ``TemporaryError``; 401 and 403
``AccessDenied``; 400 ``Invalid``; 409 ``AlreadyExists``).

``endpoint``: the service's host (default ``<region>-aiplatform.googleapis.com``, with the environment's credentials);
an ``http://`` address is a local stand-in (``landfall.local.vertex_server``), called without credentials. The client
library is imported on first use: only a deployment that runs the managed engine installs it (pyproject's ``vertex``
extra).
"""

from __future__ import annotations

import json
from typing import Any

from landfall.core.services import google_api

SERVICE = "Vertex AI"


def parse_custom_job(body: dict[str, Any]) -> Any:
    """``body`` (REST JSON) as the client's ``CustomJob`` message, strictly: a field the API lacks or a value of the
    wrong type raises ``ValueError`` with the parser's words."""
    from google.cloud.aiplatform_v1.types import CustomJob
    from google.protobuf import json_format

    try:
        return CustomJob.from_json(json.dumps(body), ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from None


def as_dict(message: Any) -> dict[str, Any]:
    """A client message as the REST API's JSON (camelCase, enums by name)."""
    return json.loads(type(message).to_json(message, use_integers_for_enums=False))


class VertexJobs:
    """The ``customJobs`` of one project and region."""

    def __init__(self, project: str, region: str, endpoint: str = ""):
        self.parent = f"projects/{project}/locations/{region}"
        self.endpoint = endpoint or f"{region}-aiplatform.googleapis.com"
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from google.api_core.client_options import ClientOptions
            from google.cloud.aiplatform_v1 import JobServiceClient

            credentials = None
            if self.endpoint.startswith("http://"):
                from google.auth.credentials import AnonymousCredentials

                credentials = AnonymousCredentials()
            self._client = JobServiceClient(credentials=credentials, transport="rest",
                                            client_options=ClientOptions(api_endpoint=self.endpoint))
        return self._client

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Creates a CustomJob from ``body``; the service's resource (its ``name`` and ``state`` set)."""
        job = parse_custom_job(body)
        with google_api.mapped_errors(f"creating CustomJob {body.get('displayName')!r}", SERVICE):
            return as_dict(self.client.create_custom_job(parent=self.parent, custom_job=job))

    def get(self, name: str) -> dict[str, Any]:
        with google_api.mapped_errors(f"CustomJob {name}", SERVICE):
            return as_dict(self.client.get_custom_job(name=name))

    def list(self, filter_: str = "") -> list[dict[str, Any]]:
        """Every CustomJob of the region that ``filter_`` (the API's filter syntax) selects, all pages."""
        with google_api.mapped_errors(f"listing CustomJobs of {self.parent}", SERVICE):
            return [as_dict(j) for j in self.client.list_custom_jobs(request={"parent": self.parent,
                                                                              "filter": filter_})]

    def cancel(self, name: str) -> None:
        with google_api.mapped_errors(f"cancelling CustomJob {name}", SERVICE):
            self.client.cancel_custom_job(name=name)

    def delete(self, name: str) -> None:
        """Deletes a job that has ended (the service refuses a running one: cancel it first)."""
        with google_api.mapped_errors(f"deleting CustomJob {name}", SERVICE):
            self.client.delete_custom_job(name=name).result(timeout=60)
