"""The ``landfall`` command: a thin dispatcher over one module per command group; never deployed.
May import every other subpackage: it is the top layer.
Imported by the ``landfall`` console script and ``python -m landfall.cli`` only.

Each command group's module is imported only when used, so ``landfall convert`` never pays for
TensorFlow and ``landfall train`` never pays for the emulators.

A subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``. Commands listed in
``PASSTHROUGH`` own their whole argument list (``landfall train ...`` is ``python -m trainer.task ...``).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("landfall.cli.convert", "convert a file into TFRecord shards and a manifest"),
    "render-job": ("landfall.cli.jobs", "print the TFJob (--engine jobset: JobSet) the submit function would create"),
    "render-tfjob": ("landfall.cli.jobs", "the old name of render-job"),
    "republish": ("landfall.cli.jobs", "publish a manual training request (a rerun)"),
    "status": ("landfall.cli.status", "arrivals, requests, jobs, their state and latest metrics"),
    "datasets": ("landfall.cli.datasets", "dataset specs: validate, apply, show or list them (docs/datasets.md)"),
    "trace": ("landfall.cli.trace", "follow one arrival through every record, or a job back to its arrivals"),
    "report": ("landfall.cli.report", "one self-contained HTML page of what the bucket holds"),
    "promote": ("landfall.cli.models", "make a run's model its dataset's champion (records who asked)"),
    "rollback": ("landfall.cli.models", "restore a dataset's previous champion"),
    "admit": ("landfall.cli.quarantine", "release a quarantined arrival to training (records who and when)"),
    "reject": ("landfall.cli.quarantine", "retract a quarantined arrival for good (records who and when)"),
    "score": ("landfall.cli.score", "anomaly scores for every instance of a file, with the champion or a model"),
    "rescore": ("landfall.cli.rescore", "score a dataset's arrivals again with its current champion (--since T)"),
    "reconcile": ("landfall.cli.reconcile", "start waiting follow-up jobs (the reconciler)"),
    "compact": ("landfall.cli.compact", "compact a dataset's small arrivals into large shards and snapshot it"),
    "operator": ("landfall.cli.operator", "run recorded TFJobs on this machine (the local backend's controller)"),
    "up": ("landfall.cli.local", "start the whole stack on this machine on real emulators"),
    "demo": ("landfall.cli.local", "run the whole flow end to end on this machine"),
    "upload": ("landfall.cli.local", "upload a file to incoming/<dataset>/ of the local stack"),
    "scaling": ("landfall.cli.local", "epoch time and throughput against the number of workers"),
}
PASSTHROUGH: dict[str, tuple[str, str]] = {
    "train": ("trainer.task", "train the autoencoder from manifests (same flags as python -m trainer.task)"),
    "bench": ("landfall_bench.cli", "benchmarks: `landfall bench convert | train | submit`"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASSTHROUGH:
        module = importlib.import_module(PASSTHROUGH[argv[0]][0])
        code = int(module.main(argv[1:]) or 0)
        if argv[0] == "train":
            module.hard_exit(code)  # as `python -m trainer.task`: gRPC threads must not hold the exit
        return code
    parser = argparse.ArgumentParser(prog="landfall", description="Event-driven TensorFlow training.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in PASSTHROUGH.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if argv and argv[0] in COMMANDS:
        # Import only the module of the command asked for.
        selected = {argv[0]: COMMANDS[argv[0]]}
    else:
        selected = {}
        for name, (_, help_text) in COMMANDS.items():
            sub.add_parser(name, help=help_text)
    for name, (module_name, help_text) in selected.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text)
        module.add_arguments(name, p)
        p.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    return int(args._run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
