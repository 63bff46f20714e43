"""Storage credentials that are not there yet: Workload Identity in a new pod.

The trainer authenticates as it does on GKE: google-auth finds the metadata server (a stand-in at
``GCE_METADATA_HOST``, ``helpers.MetadataServer``) and fetches a token from it; Cloud Storage is the
emulator, reached with that token. The metadata server refuses the service account's token (503)
until it is made ready, as the GKE metadata server does in the first moments of a pod, so the
first storage call fails inside google-auth (``RefreshError`` from ``TransportError``, after
google-auth's own five tries, 15 s). The trainer must exit 128, which the training operator
retries, and the retry, identical, must train.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from landfall.core.services.storage import Storage
from tests.trainer.helpers import REPO, MetadataServer, make_array, run_trainer, trainer_env, write_dataset
from trainer.errors import EXIT_OK, EXIT_TEMPORARY

SMALL = ["--epochs", "1", "--batch-size-per-worker", "32", "--units", "8,4", "--verbose", "0"]


def _errors(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{") and '"ERROR"' in line]


def _run_until_failure_then_ready(args: list[str], env: dict, metadata: MetadataServer,
                                  timeout: float = 300) -> tuple[int, str]:
    """Runs the trainer; Workload Identity becomes ready as soon as the trainer has logged its
    failure, so the failure record (metrics.json) goes out with a token."""
    proc = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=trainer_env(**env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("{") and '"ERROR"' in line:
                metadata.make_ready()
        return proc.wait(), "".join(lines)
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()


def test_a_first_token_fetch_that_fails_exits_128_and_the_retry_trains(emulator_stack, bucket, tmp_path):
    storage: Storage = emulator_stack.storage
    manifest = write_dataset(storage, f"gs://{bucket}/tfrecords/demo/arrival-1", make_array(300), shards=2)
    job_dir = f"gs://{bucket}/runs/workload-identity"
    args = ["--manifest", manifest, "--job-dir", job_dir, *SMALL]
    with MetadataServer(ready=False).running() as metadata:
        env = metadata.env(emulator_stack.storage_url, tmp_path / "no-gcloud")

        code, stderr = _run_until_failure_then_ready(args, env, metadata)
        assert code == EXIT_TEMPORARY, stderr[-3000:]
        assert metadata.refused >= 5  # google-auth's five tries
        [error] = _errors(stderr)
        assert error["phase"] == "reading the manifests" and error["retryable"] is True, error
        assert error["exit_code"] == EXIT_TEMPORARY
        assert "storage or its credentials are unreachable: RefreshError: Failed to retrieve" in error["message"]
        assert "Compute Engine Metadata server unavailable" in error["message"]
        assert metadata.tokens >= 1  # the failure record went out with a token
        metrics = json.loads(storage.read_bytes(f"{job_dir}/metrics.json"))
        assert (metrics["status"], metrics["retryable"], metrics["exit_code"]) == ("failed", True, EXIT_TEMPORARY)
        assert metrics["failed_phase"] == "reading the manifests"

        second = run_trainer(args, **env)  # the operator restarts the replica with the same spec
        assert second.returncode == EXIT_OK, second.stderr[-3000:]
        assert not _errors(second.stderr)
    metrics = json.loads(storage.read_bytes(f"{job_dir}/metrics.json"))
    assert metrics["status"] == "succeeded" and [e["epoch"] for e in metrics["epochs"]] == [1]
    assert metrics["error"] is None and metrics["failed_phase"] is None
    assert storage.exists(f"{job_dir}/model/saved_model.pb")
