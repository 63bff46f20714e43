"""The one error mapping for Google's client libraries (``google-api-core``), used by ``storage`` and ``pubsub``.

Retry classes, after Cloud Storage's retry strategy (https://cloud.google.com/storage/docs/retry-strategy:
408, 429 and 5xx are retried, other 4xx are not; ``tests/landfall/core/test_google_api.py`` holds the rule
as data): 404 -> ``NotFound``; 409 on create and 412 (a failed ``ifGenerationMatch``) -> ``AlreadyExists``;
408, 429, 5xx, deadlines, aborted or cancelled calls, exhausted client retries and connection errors ->
``TemporaryError``; 401 and 403 -> ``AccessDenied`` (a ``TemporaryError``: IAM changes propagate for
minutes, and a missing grant is fixed by a deploy, so the input is retried and dead-lettered, never rejected);
400 (say an object name Cloud Storage refuses) -> ``Invalid``; every other 4xx (405, 411, 413, 416 ...) ->
``PermanentError``: the same call is refused the same way on every try.
Anything else passes through unchanged (a bug or an unexpected answer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

import requests
from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.auth import exceptions as auth_exceptions

from landfall.core.errors import AccessDenied, AlreadyExists, Invalid, NotFound, PermanentError, TemporaryError

TEMPORARY = (gexc.TooManyRequests, gexc.ServerError, gexc.DeadlineExceeded, gexc.Aborted, gexc.Cancelled,
             gexc.RetryError, requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)
REQUEST_TIMEOUT = 408  # no class of its own in google-api-core
T = TypeVar("T")


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
    except gexc.GoogleAPICallError as exc:
        code = exc.code if isinstance(exc.code, int) else None
        if code == REQUEST_TIMEOUT or (code is not None and code >= 500):
            raise TemporaryError(f"{what}: {service} unavailable: {_short(exc)}") from exc
        if code in (401, 403):
            raise AccessDenied(f"{what}: {service} denied access ({code}): {_short(exc)}") from exc
        if code == 400:
            raise Invalid(f"{what}: {service} refused the request (400): {_short(exc)}") from exc
        if code is not None and 400 < code < 500:
            raise PermanentError(f"{what}: {service} refused the request ({code}): {_short(exc)}") from exc
        raise


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def retried(call: Callable[[], T], bound_s: float, initial_s: float = 0.2, maximum_s: float = 5.0) -> T:
    """``call()``, retried with exponential backoff (google-api-core's ``Retry``) while it raises a
    ``TemporaryError``, for at most ``bound_s``; past the bound, the last ``TemporaryError`` itself."""
    retry = gretry.Retry(predicate=gretry.if_exception_type(TemporaryError), initial=initial_s, maximum=maximum_s,
                         multiplier=2.0, timeout=bound_s)
    try:
        return retry(call)()
    except gexc.RetryError as exc:
        if isinstance(exc.cause, TemporaryError):
            raise exc.cause from None
        raise
