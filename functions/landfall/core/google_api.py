"""The one error mapping for Google's client libraries (``google-api-core``), used by ``storage`` and ``pubsub``.

Retry classes: 404 -> ``NotFound``; 409 on create and 412 (a failed ``ifGenerationMatch``) ->
``AlreadyExists``; 429, 5xx, deadlines, aborted transactions, exhausted client retries and connection
errors -> ``TemporaryError``. Anything else passes through unchanged (a bug or an unexpected answer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exceptions

from landfall.core.errors import AlreadyExists, NotFound, TemporaryError

TEMPORARY = (gexc.TooManyRequests, gexc.ServerError, gexc.DeadlineExceeded, gexc.Aborted, gexc.RetryError,
             requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)


def is_transient(exc: BaseException) -> bool:
    """A Google client or its credentials out of reach for now: the errors above, a transport error while
    fetching a token (Workload Identity not ready in a new pod), or an auth error Google marks retryable."""
    return isinstance(exc, (*TEMPORARY, auth_exceptions.TransportError)) or (
        isinstance(exc, auth_exceptions.GoogleAuthError) and bool(getattr(exc, "retryable", False)))


@contextlib.contextmanager
def mapped_errors(what: str, service: str) -> Iterator[None]:
    try:
        yield
    except gexc.NotFound as exc:
        raise NotFound(f"{what}: not found") from exc
    except TEMPORARY as exc:  # before Conflict: Aborted is a 409 that means "try again"
        raise TemporaryError(f"{what}: {service} unavailable: {exc}") from exc
    except (gexc.PreconditionFailed, gexc.Conflict) as exc:  # AlreadyExists is a Conflict
        raise AlreadyExists(f"{what}: already exists") from exc
