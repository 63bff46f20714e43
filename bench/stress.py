"""``landfall bench trainer-stress``: many short trainer processes under load, and how each of them exited (#46).

A crash that only load shows is a race: this makes the load. One dataset of seed-shaped instances is converted
once; then ``--runs`` real ``python -m trainer.task`` processes train a toy model on it, ``--parallel`` at a time,
beside ``--burners`` processes that spin on the CPU. Each run has its own job dir. Every trainer runs with
``PYTHONFAULTHANDLER=1`` (a fatal signal prints every thread's Python stack) and, with ``--cores DIR``, an
unlimited core size, so a crash can be opened in gdb. It prints the count of every exit code, the wall time of each
run (median, max) and, for every run that did not exit 0, the last lines of its stderr: the frame that crashed.

    landfall bench trainer-stress --runs 200 --parallel 2 --burners 1
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import multiprocessing
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHAPE = (36, 10)


def _burn(stop) -> None:  # pragma: no cover - runs in a child process
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


def _prepare(work: Path, instances: int) -> str:
    from landfall.arrival.config import ConverterConfig
    from landfall.arrival.converter import convert
    from landfall.core.services.storage import Storage
    from landfall.local.synthetic import time_series

    np.save(work / "arrival.npy", time_series(instances, *SHAPE))
    convert(str(work / "arrival.npy"), str(work / "tfrecords"), "stress", ConverterConfig.load({}), Storage())
    return str(work / "tfrecords" / "manifest.json")


def _run_one(i: int, args, manifest: str, work: Path) -> dict:
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONFAULTHANDLER": "1",
                "CUDA_VISIBLE_DEVICES": env.get("CUDA_VISIBLE_DEVICES", "")})
    source = Path(args.source).resolve() if args.source else REPO
    env["PYTHONPATH"] = os.pathsep.join([str(source), str(source / "functions"), env.get("PYTHONPATH", "")])
    cores = Path(args.cores) / f"run-{i}" if args.cores else None
    if cores is not None:
        cores.mkdir(parents=True, exist_ok=True)

    def limits() -> None:  # in the child, before exec
        if cores is not None:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    cmd = [sys.executable, "-m", "trainer.task", "--manifest", manifest, "--job-dir", str(work / f"job-{i}"),
           "--work-dir", str(work / f"work-{i}"), "--epochs", str(args.epochs), "--batch-size-per-worker", "64",
           "--units", args.units, "--warm-start", "none", "--min-skill", "-1", "--verbose", "0", *args.extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cores or source, env=env, capture_output=True, text=True, preexec_fn=limits,
                          timeout=args.timeout)
    row = {"run": i, "code": proc.returncode, "wall_s": round(time.monotonic() - t0, 2),
           "fit_return_s": _fit_return_s(work / f"job-{i}" / "metrics.json"),
           "beside_training_s": _beside_training_s(work / f"job-{i}" / "metrics.json")}
    if proc.returncode != 0:
        row["stderr_tail"] = proc.stderr[-args.tail:]
        if cores is not None:
            (cores / "stderr").write_text(proc.stderr)
    elif cores is not None:
        cores.rmdir()
    return row


def _fit_return_s(metrics: Path) -> float | None:
    """From the last callback's end of training to ``fit``'s return (the #42 stall), from the run's timeline."""
    try:
        spans = json.loads(metrics.read_text())["timeline"]["summary"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return next((s["seconds"] for s in spans if s.get("phase") == "after training ended"), None)


def _beside_training_s(metrics: Path) -> list[float]:
    """Each epoch's seconds outside its training steps (validation, its iterator's end, the callbacks)."""
    try:
        epochs = json.loads(metrics.read_text())["epochs"]
        return [round(float(e["wall_s"]) - float(e["train_s"]), 3) for e in epochs]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def describe(code: int) -> str:
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="landfall bench trainer-stress", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--parallel", type=int, default=2, help="trainers at once")
    p.add_argument("--burners", type=int, default=1, help="CPU-burning processes beside them")
    p.add_argument("--instances", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--units", default="8,4")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--tail", type=int, default=6000, help="characters of a failed run's stderr kept")
    p.add_argument("--cores", help="a folder for core dumps: each trainer runs in its own folder there, with no core "
                                   "size limit (a crashed run's folder keeps its core and its stderr)")
    p.add_argument("--source", help="the checkout whose trainer runs (default: this one), e.g. an older commit's "
                                    "clone, to measure before and after a fix in one way")
    p.add_argument("--work-dir", help="scratch folder (default: a temporary one)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("extra", nargs="*", help="more trainer flags, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cores:
        Path(args.cores).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="landfall-bench-stress-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        manifest = _prepare(work, args.instances)
        stop = multiprocessing.Event()
        burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True) for _ in range(args.burners)]
        for b in burners:
            b.start()
        rows: list[dict] = []
        t0 = time.monotonic()
        try:
            with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
                futures = [pool.submit(_run_one, i, args, manifest, work) for i in range(args.runs)]
                for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                    row = fut.result()
                    rows.append(row)
                    bad = sum(r["code"] != 0 for r in rows)
                    print(f"\r{n}/{args.runs} runs, {bad} not 0", end="", file=sys.stderr, flush=True)
        finally:
            stop.set()
            for b in burners:
                b.join(5)
                if b.is_alive():
                    b.kill()
        print(file=sys.stderr)
    codes = collections.Counter(r["code"] for r in rows)
    walls = [r["wall_s"] for r in rows]
    crashes = sum(n for c, n in codes.items() if c < 0 or c in (134, 139))
    returns = sorted(r["fit_return_s"] for r in rows if r.get("fit_return_s") is not None)
    beside = sorted(s for r in rows for s in r.get("beside_training_s") or [])
    result = {"runs": len(rows), "parallel": args.parallel, "burners": args.burners, "instances": args.instances,
              "epochs": args.epochs, "units": args.units, "exit_codes": {describe(c): n for c, n in codes.items()},
              "crashes": crashes, "wall_s_median": statistics.median(walls), "wall_s_max": max(walls),
              "elapsed_s": round(time.monotonic() - t0, 1),
              "fit_return_s_median": statistics.median(returns) if returns else None,
              "fit_return_s_max": returns[-1] if returns else None,
              "beside_training_s_median": statistics.median(beside) if beside else None,
              "beside_training_s_max": beside[-1] if beside else None,
              "failed": [r for r in rows if r["code"] != 0]}
    print(f"{len(rows)} trainer runs, {args.parallel} at a time beside {args.burners} CPU burner(s): "
          f"exit codes {result['exit_codes']}; {crashes} crashed (a fatal signal); "
          f"run wall median {result['wall_s_median']:.1f} s, max {result['wall_s_max']:.1f} s, "
          f"{result['elapsed_s']:.0f} s in all")
    if returns:
        print(f"fit's return after the last callback (the #42 stall): median {result['fit_return_s_median']:.3f} s, "
              f"max {result['fit_return_s_max']:.3f} s")
    if beside:
        print(f"an epoch's time beside its training steps (validation and its iterator's end, callbacks): median "
              f"{result['beside_training_s_median']:.3f} s, max {result['beside_training_s_max']:.3f} s")
    for r in result["failed"]:
        print(f"--- run {r['run']} exited {describe(r['code'])}; the end of its stderr:\n{r['stderr_tail']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if not crashes else 1


if __name__ == "__main__":
    raise SystemExit(main())
