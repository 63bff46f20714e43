"""Test data for the trainer: shards and a manifest in the exact format the converter writes.

``write_dataset`` stands in for ``landfall.arrival.converter.convert`` where a test needs to control what it
writes (bad manifests, odd shard counts); the cross-stage test uses the real converter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np

from landfall.core.contracts.layout import shard_name
from landfall.core.contracts.messages import FeatureStats, Manifest, Shard, Source
from landfall.core.contracts.records import RecordFramer
from landfall.core.services.storage import Storage, join
from tests.fakes.http import LoopbackServer

REPO = Path(__file__).resolve().parents[2]
SHAPE = (36, 10)


def make_array(n: int, seed: int = 0, shape: tuple[int, int] = SHAPE) -> np.ndarray:
    """Smooth, learnable sequences (sines of random phase and frequency) plus a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(shape[0], dtype=np.float32)[None, :, None]
    freq = rng.uniform(0.1, 0.5, size=(n, 1, shape[1])).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, shape[1])).astype(np.float32)
    x = 3.0 * np.sin(freq * t + phase) + 1.5 + 0.05 * rng.standard_normal((n, *shape)).astype(np.float32)
    return x.astype("<f4")


def write_dataset(storage: Storage, prefix: str, array: np.ndarray, shards: int = 2, dataset: str = "demo",
                  arrival_id: str = "arrival-1", **manifest_overrides) -> str:
    """Writes ``part-*.tfrecord`` shards and ``manifest.json`` under ``prefix``; returns the manifest URI."""
    framer = RecordFramer(tuple(array.shape[1:]))
    refs = []
    for i, part in enumerate(np.array_split(array, shards)):
        uri = join(prefix, shard_name(i, shards))
        with storage.open_write(uri) as out:
            out.write(framer.frame(part))
        refs.append(Shard(uri=uri, count=len(part), bytes=out.size, crc32c=out.crc32c))
    flat = array.reshape(-1, array.shape[-1]).astype(np.float64)
    stats = FeatureStats(mean=flat.mean(0).tolist(), std=flat.std(0).tolist(), min=flat.min(0).tolist(),
                         max=flat.max(0).tolist())
    manifest = Manifest(dataset=dataset, arrival_id=arrival_id, source=Source("b", "incoming/x.npy", 1, 1),
                        shape=list(array.shape[1:]), count=len(array), shards=refs, stats=stats)
    if manifest_overrides:
        manifest = dataclasses.replace(manifest, **manifest_overrides)
    uri = join(prefix, "manifest.json")
    storage.write_bytes(uri, manifest.to_json().encode())
    return uri


def trainer_env(**extra: str | None) -> dict[str, str]:
    """This process's environment for a trainer; an ``extra`` value of None removes that variable."""
    env = dict(os.environ)
    env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
                "CUDA_VISIBLE_DEVICES": ""})
    env.pop("TF_CONFIG", None)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_trainer(args: list[str], timeout: float = 300, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=trainer_env(**env),
                          capture_output=True, text=True, timeout=timeout)


# -- a GKE metadata server -------------------------------------------------------------------------

SERVICE_ACCOUNTS = "/computeMetadata/v1/instance/service-accounts/"
EMAIL = "trainer@landfall-test.iam.gserviceaccount.com"  # the Workload Identity service account it serves


class MetadataServer:
    """The GKE metadata server as google-auth talks to it (``GCE_METADATA_HOST``/``GCE_METADATA_IP``):
    it answers the detection ping, 404s what it does not know (project id, universe domain: the
    defaults), and serves the Workload Identity service account and its access tokens.

    Like the GKE metadata server in the first moments of a new pod, before Workload Identity can
    hand out tokens, it answers every request for the service account or a token with 503 until
    ``make_ready()``: google-auth tries five times (1 + 2 + 4 + 8 s apart), then raises
    ``TransportError`` ("Compute Engine Metadata server unavailable"), which the credentials
    re-raise as ``RefreshError`` from it. (Not ready for a number of requests instead would not
    do: the storage client refreshes its credentials from two threads at once, which share them.)
    """

    def __init__(self, ready: bool = True):
        self.is_ready = ready
        self.refused = 0
        self.tokens = 0
        self.lock = threading.Lock()
        self.http = LoopbackServer(self._handler())
        self.host = self.http.address

    def make_ready(self) -> None:
        with self.lock:
            self.is_ready = True

    def env(self, storage_url: str, sdk_config: Path) -> dict[str, str | None]:
        """A trainer environment that authenticates through this server and reaches the storage
        emulator with the token (``API_ENDPOINT_OVERRIDE``: a custom endpoint that keeps auth, where
        ``STORAGE_EMULATOR_HOST`` would switch to anonymous credentials)."""
        return {"GCE_METADATA_HOST": self.host, "GCE_METADATA_IP": self.host, "API_ENDPOINT_OVERRIDE": storage_url,
                "STORAGE_EMULATOR_HOST": None, "GOOGLE_APPLICATION_CREDENTIALS": None, "NO_GCE_CHECK": None,
                "CLOUDSDK_CONFIG": str(sdk_config)}  # no gcloud application-default credentials either

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                path = self.path.split("?", 1)[0]
                if path.startswith(SERVICE_ACCOUNTS):
                    with owner.lock:
                        ready = owner.is_ready
                        owner.refused += not ready
                    if not ready:
                        return self._send(503, "text/plain", b"Workload Identity is not ready yet")
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self._send(403, "text/plain", b"Missing Metadata-Flavor:Google header.")
                if path == "/":
                    return self._send(200, "application/text", b"computeMetadata/")
                # The account answers by its alias and by its email, as the metadata server does (google-auth asks
                # by the email once a refresh has read it: two threads refreshing at once under load do).
                account = path[len(SERVICE_ACCOUNTS):].split("/", 1)[0] if path.startswith(SERVICE_ACCOUNTS) else ""
                rest = path[len(SERVICE_ACCOUNTS) + len(account):] if account in ("default", EMAIL) else None
                if rest == "/":
                    return self._json({"aliases": ["default"], "email": EMAIL,
                                       "scopes": ["https://www.googleapis.com/auth/cloud-platform"]})
                if rest == "/token":
                    with owner.lock:
                        owner.tokens += 1
                    return self._json({"access_token": f"ya29.test-{owner.tokens}", "expires_in": 3599,
                                       "token_type": "Bearer"})
                return self._send(404, "text/html", b"not found")

            def _json(self, doc: dict) -> None:
                self._send(200, "application/json", json.dumps(doc).encode())

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

        return Handler

    @contextlib.contextmanager
    def running(self) -> Iterator[MetadataServer]:
        self.http.start()
        try:
            yield self
        finally:
            self.http.stop()
