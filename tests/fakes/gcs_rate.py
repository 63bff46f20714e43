"""Cloud Storage's write rate to one object name, enforced in front of fake-gcs-server (which has no limit).

A ``requests.Session`` for ``google.cloud.storage.Client(_http=...)``: every request goes to the emulator as usual,
but a write to an object name that was written less than ``RULE["per_seconds"]`` ago is refused as Cloud Storage
refuses it: HTTP 429 with reason ``rateLimitExceeded``, so the client raises ``TooManyRequests`` and
``landfall.core.services.google_api`` maps it (a ``TemporaryError``). Counted writes: uploads (multipart, resumable,
media),
the destination of a copy, rewrite or compose, and metadata updates, each counted when it succeeded; refused ones
are counted in ``refused`` per name.
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time
import urllib.parse

import requests

# The rule as data, with where it was read.
RULE = {
    "limit": "Maximum rate of writes to the same object name",
    "writes": 1,
    "per_seconds": 1.0,
    "status": 429,
    "reason": "rateLimitExceeded",
    "source": "https://cloud.google.com/storage/quotas",
    "read": "2026-12-03",
}

_DEST = re.compile(r"/b/([^/]+)/o/([^/?]+)/(?:copyTo|rewriteTo)/b/([^/]+)/o/([^/?]+)")
_COMPOSE = re.compile(r"/b/([^/]+)/o/([^/?]+)/compose")
_OBJECT = re.compile(r"/storage/v1/b/([^/]+)/o/([^/?]+)$")
_UPLOAD = re.compile(r"/upload/storage/v1/b/([^/]+)/o")


def _written_name(method: str, url: str, kwargs: dict) -> tuple[str, str] | None:
    """(bucket, object name) a request writes, or None."""
    parts = urllib.parse.urlsplit(url)
    path, query = parts.path, urllib.parse.parse_qs(parts.query)
    if method == "POST" and _UPLOAD.search(path):
        name = query.get("name", [None])[0]
        if name is None:  # multipart: the name is in the JSON part of the body
            body = kwargs.get("data") or b""
            body = body.encode() if isinstance(body, str) else body
            if not isinstance(body, bytes):
                return None  # a streamed body: its name was in the query
            m = re.search(rb'"name":\s*"((?:[^"\\]|\\.)*)"', body)
            name = json.loads(b'"' + m.group(1) + b'"') if m else None
        return (_UPLOAD.search(path).group(1), name) if name else None
    if method == "POST":
        m = _DEST.search(path)
        if m:
            return m.group(3), urllib.parse.unquote(m.group(4))
        m = _COMPOSE.search(path)
        if m:
            return m.group(1), urllib.parse.unquote(m.group(2))
    if method in ("PATCH", "PUT"):
        m = _OBJECT.search(path)
        if m:
            return m.group(1), urllib.parse.unquote(m.group(2))
    return None


class RateLimitedSession(requests.Session):
    """Refuses a second write to one name within ``RULE['per_seconds']``, as Cloud Storage does."""

    def __init__(self, clock=time.monotonic):
        super().__init__()
        self.clock = clock
        self.lock = threading.Lock()
        self.last: dict[tuple[str, str], float] = {}
        self.writes: collections.Counter = collections.Counter()
        self.refused: collections.Counter = collections.Counter()
        self.closest: dict[tuple[str, str], float] = {}  # the shortest gap between two accepted writes, per name

    def request(self, method, url, *args, **kwargs):
        name = _written_name(method.upper(), url, kwargs)
        if name is None:
            return super().request(method, url, *args, **kwargs)
        with self.lock:
            now = self.clock()
            if now - self.last.get(name, -1e18) < RULE["per_seconds"]:
                self.refused[name] += 1
                return _refusal(url)
            before = self.last.get(name)
            self.last[name] = now  # held while the write runs: a concurrent second write is refused too
        response = super().request(method, url, *args, **kwargs)
        with self.lock:
            if response.status_code < 300:
                self.writes[name] += 1
                if before is not None:
                    self.closest[name] = min(self.closest.get(name, 1e18), now - before)
            elif before is not None:
                self.last[name] = before  # not written: it does not count
            else:
                self.last.pop(name, None)
        return response


def _refusal(url: str) -> requests.Response:
    out = requests.Response()
    out.status_code = RULE["status"]
    out.url = url
    out.reason = "Too Many Requests"
    out.headers["Content-Type"] = "application/json; charset=UTF-8"
    message = "The object exceeded the rate limit for object mutation operations (create, update, and delete)."
    out._content = json.dumps({"error": {"code": RULE["status"], "message": message, "errors": [
        {"message": message, "domain": "usageLimits", "reason": RULE["reason"]}]}}).encode()
    return out


def rate_limited_client(project: str, session: RateLimitedSession | None = None):
    """Google's storage client on the emulator (``STORAGE_EMULATOR_HOST``) through ``session`` (the fake shares no
    code with what it checks: the test wraps the client in ``landfall.core.services.storage.Storage`` itself)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    session = session or RateLimitedSession()
    return gcs.Client(project=project, credentials=AnonymousCredentials(), _http=session), session
