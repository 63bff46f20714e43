"""``landfall bench memory``: the peak RSS of every process of the local stack while a seed-sized file arrives.

Starts the stack as ``landfall up`` does (``landfall.local.stack.Stack``: the Pub/Sub emulator, fake-gcs-server,
both functions, the local operator), writes a ``.npy`` of ``--instances`` x 36 x 10 float32 (default the seed's
2,235,385: 3.0 GiB), uploads it with ``landfall upload``'s code path (``Storage.upload``) to
``incoming/<dataset>/``, and waits until its conversion's manifest is in ``tfrecords/<dataset>/`` (the large-file
path: the arrival function records a Cloud Run execution, the operator runs its tasks as processes). Then the
stack stops; a training job it may have released by then is stopped with it.

Every 0.2 s it reads ``VmHWM`` (the kernel's peak resident set) of each stack process and of every descendant
(converter tasks, function workers, trainers), keeping the last value seen per process; the uploading client is
this process (its own ``VmHWM`` at the end). Printed: one line per process, the peak, and the largest.

``--upload resumable`` sends the file as ``Storage.upload`` did before (the library's resumable upload, no chunk
size), to compare the two with the same command. Not a test: at full size it writes ~10 GiB and takes minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from landfall.core.services import storage as storage_mod
from landfall.core.services.storage import Storage

SEED_INSTANCES = 2_235_385  # the seed's dataset (issue #32): 3.0 GiB as .npy
SHAPE = (36, 10)
MIB = 2**20


def write_npy(path: Path, instances: int, block: int = 65_536, seed: int = 0) -> int:
    """Written block by block with plain writes (a memory map would count its pages in this process's RSS)."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as fh:
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
                  "shape": (instances, *SHAPE)}
        np.lib.format.write_array_header_1_0(fh, header)
        for start in range(0, instances, block):
            fh.write(rng.standard_normal((min(block, instances - start), *SHAPE), dtype=np.float32).tobytes())
    return path.stat().st_size


def status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def label(pid: int, root: str) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return root
    words = [a.decode(errors="replace") for a in argv if a]
    if "-m" in words and words.index("-m") + 1 < len(words):
        mod = words[words.index("-m") + 1]
        return f"{root}: {mod}" + (f" {words[words.index('-m') + 2]}" if len(words) > words.index("-m") + 2
                                   and mod == "landfall.cli" else "")
    return f"{root}: {Path(words[0]).name}" if words else root


class Sampler(threading.Thread):
    def __init__(self, roots: dict[str, int], every_s: float = 0.2):
        super().__init__(daemon=True)
        self.roots, self.every_s = roots, every_s
        self.peak: dict[int, tuple[str, int]] = {}  # pid -> (label, VmHWM KiB)
        self.stopped = threading.Event()

    def sample(self) -> None:
        kids = children_map()
        for name, root in self.roots.items():
            todo = [root]
            while todo:
                pid = todo.pop()
                todo += kids.get(pid, [])
                hwm = status_kib(pid, "VmHWM")
                if hwm is None:
                    continue
                old = self.peak.get(pid)
                self.peak[pid] = (old[0] if old else (name if pid == root else label(pid, name)),
                                  max(hwm, old[1] if old else 0))

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            time.sleep(self.every_s)

    def stop(self) -> None:
        self.sample()
        self.stopped.set()
        self.join()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="landfall bench memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=SEED_INSTANCES)
    ap.add_argument("--upload", choices=("current", "resumable"), default="current",
                    help="current: Storage.upload as it is; resumable: the library's resumable upload (before #32)")
    ap.add_argument("--inline-max-bytes", type=int, default=64 * MIB,
                    help="files above it take the large-file path (the seed's file does at the deployed limits)")
    ap.add_argument("--task-bytes", type=int, default=None, help="bytes per conversion task (default: the stack's)")
    ap.add_argument("--dir", default=None, help="where the file and the stack's state go (default: a temp dir)")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args(argv)

    from landfall.local.stack import Stack, StackConfig

    work = Path(args.dir or tempfile.mkdtemp(prefix="landfall-bench-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "seed.npy"
    t0 = time.monotonic()
    size = write_npy(src, args.instances)
    print(f"file: {args.instances:,} x 36 x 10 float32 = {size / 2**30:.2f} GiB ({time.monotonic() - t0:.0f} s)",
          flush=True)
    saved = {k: os.environ.get(k) for k in ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST")}
    cfg = StackConfig(state_dir=str(work / "state"), workers=1, epochs=1, inline_max_bytes=args.inline_max_bytes,
                      task_bytes=args.task_bytes)
    stack = Stack(cfg)
    sampler: Sampler | None = None
    try:
        stack.start()
        sampler = Sampler({p.name: p.pid for p in stack.procs})
        sampler.start()
        bucket, dataset = cfg.bucket, "seed"
        if args.upload == "resumable":
            storage_mod.UPLOAD_CHUNK = 1 << 62  # never over it: the library's own resumable upload, as before
        t0 = time.monotonic()
        Storage(cfg.project).upload(src, f"gs://{bucket}/incoming/{dataset}/{src.name}")
        uploaded = time.monotonic() - t0
        print(f"upload ({args.upload}): {uploaded:.0f} s", flush=True)
        storage = Storage(cfg.project)
        deadline = time.monotonic() + args.timeout
        while not storage.list(f"gs://{bucket}/tfrecords/{dataset}/", "manifest.json"):
            if time.monotonic() > deadline:
                print(f"no manifest after {args.timeout:.0f} s (logs: {work / 'state' / 'logs'})", file=sys.stderr)
                return 1
            if (why := stack.check()) is not None:
                print(f"the stack failed: {why}", file=sys.stderr)
                return 1
            time.sleep(1.0)
        print(f"converted: {time.monotonic() - t0:.0f} s after the upload began", flush=True)
    finally:
        if sampler is not None:
            sampler.stop()
        stack.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if not args.dir:
            with contextlib.suppress(OSError):
                shutil.rmtree(work)
    client = status_kib(os.getpid(), "VmHWM") or 0
    assert sampler is not None
    rows = [*sampler.peak.values(), ("upload client (this process)", client)]
    print(f"\npeak RSS per process ({args.upload} upload, {size / 2**30:.2f} GiB file):")
    for name, kib in sorted(rows, key=lambda r: -r[1]):
        print(f"  {kib / 1024:9.0f} MiB  {name}")
    top = max(rows, key=lambda r: r[1])
    print(f"largest: {top[1] / 1024:.0f} MiB ({top[0]}), {top[1] * 1024 / size:.2f}x the file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
