"""``python -m landfall_bench.quarantine_stack``: a quarantine acted on end to end, on a ``landfall up`` stack.

Every step is the real command in its own process, as an operator types it (issue #31, "``landfall admit`` and
``landfall reject`` work end to end on ``landfall up``):

1. ``landfall up`` in a scratch state folder; ``landfall datasets apply`` a series spec for dataset ``gait``
   (Daphnet S06R02E0's nine channels, ``bench/data``) whose ``arrival.checks`` quarantine what they flag, with a
   reference of two arrivals, and a day's quiet time so no job trains meanwhile (this is about the arrivals);
2. ``landfall upload`` two clean stretches of the recording (rows 0-1999 and 2000-3999): admitted unchecked
   (``first``), they make the reference;
3. two faulty stretches, each fault alone: rows 4000-5499 with ``ankle_vert`` x1000 (a unit change), rows
   5500-7039 with ``trunk_vert`` stuck at one value (a flat channel): both quarantined, by the check and the
   feature named, and ``landfall status`` says so;
4. ``landfall admit`` the first (``--by``), ``landfall reject`` the second: the admission and the retraction are
   recorded with who and when, the admitted arrival is live again, the rejected one retracted, and ``landfall
   status`` and ``landfall trace`` show it.

Prints each step's outcome and, with ``--json``, writes them; exits 1 if any step does not hold. Stops the stack
(SIGTERM) at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from landfall_bench.series_stack import SPEC as SERIES_SPEC
from landfall_bench.stack import landfall, local_stack, wait_for

SPEC = {**SERIES_SPEC,
        "arrival": {**SERIES_SPEC["arrival"],
                    "checks": {"action": "quarantine", "min_reference_rows": 1000, "min_reference_arrivals": 2}},
        "retrain": {"quiet_s": 86400}}
STRETCHES = [("clean-1.csv", 0, 2000, None), ("clean-2.csv", 2000, 4000, None),
             ("unit-change.csv", 4000, 5500, ("ankle_vert", "x1000")),
             ("stuck.csv", 5500, 7040, ("trunk_vert", "stuck"))]


def _write(src: Path, dst: Path, lo: int, hi: int, fault: tuple[str, str] | None) -> None:
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1 + lo:1 + hi]
    if fault:
        col = header.index(fault[0])
        first = body[0][col]
        for r in body:
            r[col] = str(float(r[col]) * 1000) if fault[1] == "x1000" else first
    with open(dst, "w", newline="") as f:
        csv.writer(f).writerows([header, *body])


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = landfall(env, "status", "--dataset", "gait", "--json", "--no-dead-letter")
    return (json.loads(done.stdout).get("datasets") or {}).get("gait", {}) if done.stdout.strip() else {}


def run(work: Path) -> dict[str, Any]:
    from landfall.core.services.storage import Storage
    from landfall_bench import realdata

    out: dict[str, Any] = {"steps": []}

    def step(what: str, ok: bool, detail: Any = None) -> None:
        out["steps"].append({"step": what, "ok": bool(ok), "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail is not None else ""), flush=True)

    with local_stack(work / "state") as (info, env):
        storage, bucket = Storage(info["project"]), info["bucket"]
        (work / "datasets").mkdir(exist_ok=True)
        (work / "datasets" / "gait.json").write_text(json.dumps(SPEC))
        applied = landfall(env, "datasets", "apply", str(work / "datasets"))
        step("landfall datasets apply (checks: quarantine)", applied.returncode == 0, applied.stderr.strip()[-300:])

        manifests: dict[str, dict[str, Any]] = {}

        def upload(name: str, lo: int, hi: int, fault: tuple[str, str] | None) -> dict[str, Any]:
            path = work / name
            _write(realdata.DATA / "S06R02E0.csv", path, lo, hi, fault)
            done = landfall(env, "upload", str(path), "--dataset", "gait")
            if done.returncode:
                raise RuntimeError(f"landfall upload {name}: {done.stderr.strip()}")

            def converted() -> Any:
                for uri in storage.list(f"gs://{bucket}/tfrecords/gait/", suffix="/manifest.json"):
                    doc = json.loads(storage.read_bytes(uri))
                    if doc["source"]["name"].endswith("/" + name):
                        return {**doc, "uri": uri}
                return None

            manifests[name] = wait_for(converted, 180, f"the conversion of {name}")
            return manifests[name]

        for name, lo, hi, fault in STRETCHES[:2]:
            m = upload(name, lo, hi, fault)
            step(f"{name} (clean) converted and admitted as one of the first", m["checks"]["status"] == "first",
                 m["checks"]["status"])
        for name, lo, hi, fault in STRETCHES[2:]:
            m = upload(name, lo, hi, fault)
            findings = [(f["check"], f["feature"], f["measured"], f["threshold"]) for f in m["checks"]["findings"]]
            expected = {"x1000": "scale_change", "stuck": "flat_channel"}[fault[1]]
            caught = any(c == expected and feat == fault[0] for c, feat, _, _ in findings)
            step(f"{name} ({fault[0]} {fault[1]}) quarantined by {expected} on {fault[0]}",
                 m["checks"]["status"] == "quarantined" and caught, {"status": m["checks"]["status"],
                                                                    "findings": findings})
        counts = _status(env)
        step("landfall status: 4 arrivals, 2 of them quarantined", (counts.get("arrivals"), counts.get(
            "quarantined")) == (4, 2), {k: counts.get(k) for k in ("arrivals", "quarantined", "latest_quarantined")})

        unit, stuck = manifests["unit-change.csv"], manifests["stuck.csv"]
        admitted = landfall(env, "admit", unit["arrival_id"], "--dataset", "gait", "--by", "ops@example.com",
                             "--json")
        record = json.loads(admitted.stdout) if admitted.returncode == 0 else {}
        step("landfall admit unit-change.csv --by ops@example.com", admitted.returncode == 0
             and record.get("by") == "ops@example.com" and bool(record.get("admitted_at")),
             {k: record.get(k) for k in ("by", "admitted_at")} if record else admitted.stderr.strip()[-300:])
        rejected = landfall(env, "reject", stuck["arrival_id"], "--dataset", "gait", "--by", "ops@example.com",
                             "--json")
        record = json.loads(rejected.stdout) if rejected.returncode == 0 else {}
        step("landfall reject stuck.csv --by ops@example.com", rejected.returncode == 0
             and record.get("by") == "ops@example.com" and record.get("reason") == "rejected",
             {k: record.get(k) for k in ("by", "retracted_at", "reason")} if record else rejected.stderr.strip()[-300:])
        counts = _status(env)
        step("landfall status after: 3 arrivals, none quarantined, 1 retracted", (counts.get("arrivals"), counts.get(
            "quarantined", 0), counts.get("retracted")) == (3, 0, 1),
             {k: counts.get(k) for k in ("arrivals", "quarantined", "retracted")})
        for name in ("unit-change.csv", "stuck.csv"):
            traced = landfall(env, "trace", manifests[name]["arrival_id"])
            step(f"landfall trace {name}", traced.returncode in (0, 1) and bool(traced.stdout.strip()),
                 traced.stdout.strip().splitlines()[-3:])
        out["ok"] = all(s["ok"] for s in out["steps"])
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m landfall_bench.quarantine_stack", description=__doc__.split("\n")[0])
    p.add_argument("--work-dir", help="scratch folder (default: a temporary one)")
    p.add_argument("--json", help="also write the steps to this file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="landfall-quarantine-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        out = run(work)
        out["total_s"] = round(time.monotonic() - t0, 1)
        print(f"{'all steps hold' if out['ok'] else 'a step did not hold'} ({out['total_s']} s)")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
