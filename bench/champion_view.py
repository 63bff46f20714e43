"""``python -m landfall_bench.champion_view``: the trainer's added time for the champion's scoring pass
(``trainer.judging.champion_view``), as a fraction of one epoch.

Daphnet S06R02E0 (``landfall_bench.realdata``) cut into windows of ``--timesteps`` rows every ``--stride`` and into
two arrivals (the first ``--old`` share of the recording, then the rest). Job 1 trains on the first and becomes
the champion; job 2 trains on both, so its new data is the second arrival. Both are real ``python -m trainer.task``
processes with the seed's model (GRU 128 -> 32, batch 1024 unless given). Printed from job 2's ``metrics.json``:
the champion view's ``wall_s`` (its child process's start, TensorFlow's import, the champion's load and the pass)
and ``score_s`` (the load and the pass), the median epoch's ``wall_s``, and each as a fraction of it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from landfall.core.contracts.messages import FeatureStats, InputManifest, JobInputs, Manifest, Shard, Source
from landfall.core.contracts.records import RecordFramer
from landfall.core.services.storage import Storage, join
from landfall_bench import realdata


def _arrival(storage: Storage, prefix: str, array: np.ndarray, arrival_id: str) -> str:
    framer = RecordFramer(tuple(array.shape[1:]))
    uri = join(prefix, "part-00000-of-00001.tfrecord")
    with storage.open_write(uri) as out:
        out.write(framer.frame(array))
    flat = array.reshape(-1, array.shape[-1]).astype(np.float64)
    stats = FeatureStats(mean=flat.mean(0).tolist(), std=flat.std(0).tolist(), min=flat.min(0).tolist(),
                         max=flat.max(0).tolist())
    manifest = Manifest(dataset="bench", arrival_id=arrival_id, source=Source("b", f"incoming/{arrival_id}", 1, 1),
                        shape=list(array.shape[1:]), count=len(array),
                        shards=[Shard(uri=uri, count=len(array), bytes=out.size, crc32c=out.crc32c)], stats=stats)
    storage.write_bytes(join(prefix, "manifest.json"), manifest.to_json().encode())
    return join(prefix, "manifest.json")


def _inputs(runs: Path, job: str, seq: int, after: str | None, manifests: list[str]) -> str:
    (runs / job).mkdir(parents=True, exist_ok=True)
    doc = JobInputs(dataset="bench", job=job, seq=seq, after=after, requests=[],
                    manifests=[InputManifest(uri=m, generation=1) for m in manifests])
    (runs / job / "inputs.json").write_bytes(doc.to_json())
    return str(runs / job / "inputs.json")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m landfall_bench.champion_view", description=__doc__.split("\n")[0])
    p.add_argument("--timesteps", type=int, default=36)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--old", type=float, default=0.75, help="the share of the recording the champion trained on")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size-per-worker", type=int, default=1024)
    p.add_argument("--units", default="128,32")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args(argv)
    _, values, _ = realdata.daphnet()
    cut = int(len(values) * a.old)
    storage = Storage()
    with tempfile.TemporaryDirectory(prefix="landfall-bench-view-") as tmp:
        root = Path(tmp)
        uris = [_arrival(storage, str(root / "data" / name), realdata.sliding_windows(part, a.timesteps, a.stride)
                         .astype("<f4"), name) for name, part in (("old", values[:cut]), ("new", values[cut:]))]
        runs = root / "runs"
        common = ["--timesteps", str(a.timesteps), "--features", str(values.shape[1]), "--units", a.units,
                  "--batch-size-per-worker", str(a.batch_size_per_worker), "--epochs", str(a.epochs),
                  "--early-stopping-patience", "0", "--min-skill", "-1", "--verbose", "0", "--warm-start", "none"]
        for job, seq, after, mine in (("bench-1", 1, None, uris[:1]), ("bench-2", 2, "bench-1", uris)):
            done = subprocess.run([sys.executable, "-m", "trainer.task", "--inputs",
                                   _inputs(runs, job, seq, after, mine), "--job-dir", str(runs / job), *common],
                                  capture_output=True, text=True)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
        m = json.loads((runs / "bench-2" / "metrics.json").read_text())
    view = m["champion_view"]
    epoch = statistics.median(e["wall_s"] for e in m["epochs"])
    train = m["instances"]["train"]
    out = {"instances": m["instances"]["total"], "train": train, "new_instances": view["instances"],
           "flagged": view["flagged"], "epoch_wall_s": epoch, "view_wall_s": view["wall_s"],
           "view_score_s": view["score_s"], "fraction_of_epoch": round(view["wall_s"] / epoch, 3),
           "score_fraction_of_epoch": round(view["score_s"] / epoch, 3), "units": a.units,
           "batch_size_per_worker": a.batch_size_per_worker, "timesteps": a.timesteps}
    print(f"job 2: {out['instances']} instances ({train} trained on), {view['instances']} new, scored by the champion "
          f"in {view['wall_s']:.2f} s ({view['score_s']:.2f} s without the child's start); median epoch "
          f"{epoch:.2f} s: x{out['fraction_of_epoch']} of an epoch (x{out['score_fraction_of_epoch']} the pass)")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
