"""The job directory (``--job-dir``, a ``gs://`` prefix or a local path) and what lives in it.

    <job-dir>/metrics.json     landfall.metrics/v1, rewritten after every epoch (chief only)
    <job-dir>/attempts.json    how many times the job started (chief only): restarts = attempts - 1
    <job-dir>/backup/          the BackupAndRestore checkpoint, mirrored after every epoch
    <job-dir>/tensorboard/     TensorBoard event files, mirrored after every epoch
    <job-dir>/model/           the trained SavedModel and normalization.json, written at the end
    <job-dir>/timeline/        worker-<i>.json: each worker's but the chief's timeline, written as it exits
                               (trainer.stopwatch; the chief merges them into metrics.json's ``timeline``)

Everything goes through ``landfall.core.services.storage.Storage`` (one code path for Cloud Storage, the emulator
and local disk); TensorFlow only ever sees local folders that are mirrored to and from the job dir.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from landfall.core.errors import NotFound
from landfall.core.services.storage import Storage, is_gs, join

METRICS = "metrics.json"
ATTEMPTS = "attempts.json"
BACKUP = "backup"
TENSORBOARD = "tensorboard"
MODEL = "model"


class JobDir:
    def __init__(self, storage: Storage, uri: str):
        self.storage = storage
        self.uri = uri.rstrip("/") or uri

    def path(self, *parts: str) -> str:
        return join(self.uri, *parts)

    def read_json(self, name: str) -> dict[str, Any] | None:
        try:
            raw = json.loads(self.storage.read_bytes(self.path(name)))
        except NotFound:
            return None
        except ValueError:
            return None  # a torn or foreign file is treated as absent
        return raw if isinstance(raw, dict) else None

    def write_json(self, name: str, doc: dict[str, Any]) -> None:
        """Atomic on both backends: one-request upload on Cloud Storage, write-and-rename on disk."""
        self.storage.write_bytes(self.path(name), json.dumps(doc, indent=2, sort_keys=True).encode(),
                                 content_type="application/json")

    def next_attempt(self) -> int:
        """Counts this start in ``attempts.json`` and returns its number (1 on the first start)."""
        attempt = int((self.read_json(ATTEMPTS) or {}).get("attempts", 0)) + 1
        self.write_json(ATTEMPTS, {"attempts": attempt})
        return attempt

    def mirror_up(self, local_dir: Path, name: str, last: tuple[str, ...] = ("checkpoint",)) -> int:
        """Makes ``<job-dir>/<name>/`` hold exactly the files of ``local_dir``.

        Files named in ``last`` (the checkpoint pointer) go up after everything they point to, and
        stale remote files are deleted only afterwards, so a reader never finds a pointer to a
        checkpoint that is not completely there.
        """
        prefix = self.path(name)
        files = sorted(p for p in local_dir.rglob("*") if p.is_file()) if local_dir.exists() else []
        rel = {str(p.relative_to(local_dir)): p for p in files}
        first = [k for k in rel if k.rsplit("/", 1)[-1] not in last]
        for group in (first, [k for k in rel if k not in first]):
            for key in group:
                self.storage.upload(rel[key], join(prefix, key))
        for uri in self.storage.list(prefix.rstrip("/") + "/"):
            if uri[len(prefix.rstrip("/")) + 1 :] not in rel:
                self.storage.delete(uri)
        return len(rel)

    def mirror_down(self, name: str, local_dir: Path) -> int:
        return self.storage.sync_down(self.path(name), local_dir)

    def delete_tree(self, name: str) -> None:
        if not is_gs(self.uri):
            shutil.rmtree(self.path(name), ignore_errors=True)
            return
        for uri in self.storage.list(self.path(name).rstrip("/") + "/"):
            self.storage.delete(uri)
