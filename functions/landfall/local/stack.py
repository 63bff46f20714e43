"""The whole system on one machine, on real emulators: what ``landfall up`` and ``landfall demo`` run.

Processes (each its own process group, stopped by its own id, logs under ``<state>/logs``):

- Google's Pub/Sub emulator and fake-gcs-server; fake-gcs-server publishes a GCS notification
  (JSON_API_V1, ``OBJECT_FINALIZE``, objects under ``incoming/``) to the notifications topic;
- two functions-framework servers hosting ``on_data_arrival`` and ``on_training_request`` from
  ``functions/main.py``, each fed by a push subscription from the emulator, as Eventarc and Pub/Sub
  push to the deployed functions (the request subscription has the production dead-letter policy);
- the scorer (``landfall.detect.service`` under functions-framework, as the Cloud Run service ``landfall-scorer``
  runs it), fed by its own push subscriptions to the training requests and to ``landfall rescore``'s score requests
  (with its dead-letter topic); its detections go to ``landfall-detections``, which a pull subscription of the same
  name keeps for ``landfall demo``, ``status`` and whoever else pulls;
- the local operator (``landfall operator``), the ``local`` backend's controller, which runs the TFJobs
  the submit function records, and plays Cloud Run for objects above the inline threshold
  (``LANDFALL_INLINE_MAX_BYTES``, ``StackConfig.inline_max_bytes``): the arrival function records one job
  execution and the operator runs its tasks as processes (``landfall.local.executions``).

Everything lives under one state folder; ``<state>/stack.json`` describes the running stack (endpoints,
pids) and doubles as the lock: a second ``up`` on the same folder while one runs says so and stops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from landfall.core.config import Settings
from landfall.core.errors import LandfallError
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.local import emulators
from landfall.local.controllers import backend_for

MAIN = Path(__file__).resolve().parents[2] / "main.py"
SCORER = Path(__file__).resolve().parents[1] / "detect" / "service.py"  # what scorer/main.py re-exports


class StackError(LandfallError):
    """The stack could not start, or is already running."""


@dataclasses.dataclass(frozen=True)
class StackConfig(Settings):
    """``landfall up``. Environment: ``LANDFALL_STATE_DIR``, ``LANDFALL_PUBSUB_PORT`` ... (0: a free port)."""

    state_dir: str = ".landfall"
    project: str = "landfall-local"
    bucket: str = "landfall-local"
    pubsub_port: int = 0
    gcs_port: int = 0
    arrival_port: int = 0
    submit_port: int = 0
    scorer_port: int = 0
    notification_topic: str = "landfall-gcs-notifications"
    request_topic: str = "landfall-training-requests"
    dead_letter_topic: str = "landfall-training-requests-dead-letter"
    results_topic: str = "landfall-training-results"  # finished jobs' landfall.result/v1 (and a pull subscription)
    detections_topic: str = "landfall-detections"  # landfall.detection/v1 (and a pull subscription)
    score_requests_topic: str = "landfall-score-requests"  # landfall rescore
    scorer_dead_letter_topic: str = "landfall-scorer-dead-letter"
    max_delivery_attempts: int = 5
    # The jobs the submit function renders here (CPU, small enough for a laptop): TFJobs, or JobSets
    # (engine "jobset": the operator then runs them as the JobSet controller would).
    engine: str = "tfjob"
    workers: int = 2
    epochs: int = 3
    batch_size_per_worker: int = 256
    trainer_args: tuple[str, ...] = ()
    # Objects above this many bytes take the large-file path: the arrival function records a Cloud Run
    # execution and the local operator runs its tasks (None: the deployed per-format thresholds).
    inline_max_bytes: int | None = None
    task_bytes: int | None = None  # bytes per conversion task of such an object (None: the deployed 2 GiB)

    @property
    def state(self) -> Path:
        return Path(self.state_dir).resolve()


def _admin(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """A start-up call to the Pub/Sub emulator, retried while it answers late (``emulators.ready_call``)."""
    return emulators.ready_call("Pub/Sub emulator", what, lambda: call(*args, **kwargs))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_running(state_dir: str | Path) -> dict[str, Any] | None:
    """The description of a stack running on this state folder, or ``None``."""
    path = Path(state_dir) / "stack.json"
    try:
        info = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return info if _alive(int(info.get("pid", 0))) else None


# A running stack is used only when no flag, variable or gs:// URI names another target than its own: all or
# nothing, so a real bucket or project never meets the emulators. Flags by their argparse ``dest``.
TARGET_URIS = ("manifest", "object")


def _targets(info: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """(flag dest, variable, the stack's value) for everything the stack points this process at."""
    return [("bucket", "LANDFALL_BUCKET", info["bucket"]),
            ("project", "GOOGLE_CLOUD_PROJECT", info["project"]),
            ("backend", "LANDFALL_BACKEND", info.get("backend", "local")),
            ("local_state", "LANDFALL_LOCAL_STATE", info["local_state"]),
            ("engine", "LANDFALL_ENGINE", info.get("engine", "tfjob")),
            (None, "STORAGE_EMULATOR_HOST", info["storage_emulator_host"]),
            (None, "PUBSUB_EMULATOR_HOST", info["pubsub_emulator_host"]),
            *([(None, "LANDFALL_VERTEX_ENDPOINT", info["vertex_endpoint"])] if info.get("vertex_endpoint") else [])]


def named_target(args: Any, info: dict[str, Any]) -> str | None:
    """The flag, variable or URI in ``args`` (parsed flags) or the environment that names another target than the
    stack ``info`` describes, or ``None``."""
    def other(dest: str | None, value: str, ours: str) -> bool:
        return os.path.abspath(value) != os.path.abspath(ours) if dest == "local_state" else value != ours

    for dest, key, ours in _targets(info):
        flag = getattr(args, dest, None) if dest else None
        if flag is not None and other(dest, flag, ours):
            return f"--{dest.replace('_', '-')} {flag}"
        if os.environ.get(key) and other(dest, os.environ[key], ours):
            return key
    for dest in TARGET_URIS:
        uri = getattr(args, dest, None)
        if isinstance(uri, str) and uri.startswith("gs://") and uri[5:].split("/", 1)[0] != info["bucket"]:
            return uri
    return None


def use_running_stack(state_dir: str | Path | None = None, args: Any = None) -> dict[str, Any] | None:
    """Points this process at a stack that ``landfall up`` runs (``LANDFALL_STATE_DIR``, default ``.landfall``)
    unless ``args`` or the environment names another target (``named_target``: then nothing changes), and says
    so in one line on stderr; returns the stack's description when it is used, else ``None``."""
    state = state_dir or os.environ.get("LANDFALL_STATE_DIR", ".landfall")
    info = read_running(state)
    if not info or "processes" not in info or named_target(args, info):
        return None
    os.environ.update({key: value for _, key, value in _targets(info)})
    hint = "name --bucket/--project" if hasattr(args, "bucket") else "set LANDFALL_BUCKET"
    print(f"landfall{' ' + args.command if getattr(args, 'command', None) else ''}: using the local stack on "
          f"{state} (gs://{info['bucket']}, emulators at {info['storage_emulator_host']} and "
          f"{info['pubsub_emulator_host']}); {hint} to target elsewhere", file=sys.stderr)
    return info


class Stack:
    def __init__(self, cfg: StackConfig):
        self.cfg = cfg
        self.procs: list[emulators.Process] = []
        self.env: dict[str, str] = {}
        self.info: dict[str, Any] = {}

    # -- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> Stack:
        state = self.cfg.state
        running = read_running(state)
        if running:
            raise StackError(f"landfall up is already running on {state} (pid {running['pid']}): "
                             f"use it (see {state / 'stack.json'}) or stop it first")
        state.mkdir(parents=True, exist_ok=True)
        lock = state / "stack.json"
        lock.write_text(json.dumps({"pid": os.getpid(), "starting": True}))
        try:
            self._start(state)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, state: Path) -> None:
        pubsub_host, gcs_url = self._start_emulators(state)
        local_state = state / "local"
        self.env = self._function_env(pubsub_host, gcs_url, local_state)
        ports = self._start_functions(state)
        self._subscribe_functions(ports)
        self.procs.append(emulators.spawn("operator", [sys.executable, "-m", "landfall.cli", "operator",
                                                       "--state", str(local_state)], state / "logs", self.env))
        self.info = {
            "pid": os.getpid(),
            "state_dir": str(state),
            "project": self.cfg.project,
            "bucket": self.cfg.bucket,
            "pubsub_emulator_host": pubsub_host,
            "storage_emulator_host": gcs_url,
            "functions": {name: f"http://127.0.0.1:{port}/" for name, port in ports.items()},
            "local_state": str(local_state),
            "engine": self.cfg.engine,
            "backend": self.env["LANDFALL_BACKEND"],
            "vertex_endpoint": self.env["LANDFALL_VERTEX_ENDPOINT"],
            "processes": {p.name: p.pid for p in self.procs},
            "started_at": time.time(),
        }
        (state / "stack.json").write_text(json.dumps(self.info, indent=2))

    def _start_emulators(self, state: Path) -> tuple[str, str]:
        """Pub/Sub first (fake-gcs-server publishes notifications to it), its topics, then the bucket."""
        cfg = self.cfg
        pubsub_proc, pubsub_host = emulators.start_pubsub(state, cfg.project, cfg.pubsub_port or None)
        self.procs.append(pubsub_proc)
        os.environ["PUBSUB_EMULATOR_HOST"] = pubsub_host
        pubsub = PubSub(cfg.project)
        for topic in (cfg.notification_topic, cfg.request_topic, cfg.dead_letter_topic, cfg.results_topic,
                      cfg.detections_topic, cfg.score_requests_topic, cfg.scorer_dead_letter_topic):
            _admin(f"create topic {topic}", pubsub.ensure_topic, topic)
        for name in (cfg.dead_letter_topic,  # what `landfall status` reads
                     cfg.scorer_dead_letter_topic,  # and this
                     cfg.results_topic,  # training results, for whoever pulls
                     cfg.detections_topic):  # detections, for whoever pulls
            _admin(f"create subscription {name}", pubsub.ensure_subscription, name, name)
        gcs_proc, gcs_url = emulators.start_gcs(state, pubsub_host, cfg.project, cfg.notification_topic,
                                                object_prefix="incoming/", port=cfg.gcs_port or None)
        self.procs.append(gcs_proc)
        os.environ["STORAGE_EMULATOR_HOST"] = gcs_url
        emulators.ready_call("fake-gcs-server", f"create bucket {cfg.bucket}",
                             lambda: Storage(cfg.project).ensure_bucket(cfg.bucket))
        return pubsub_host, gcs_url

    def _function_env(self, pubsub_host: str, gcs_url: str, local_state: Path) -> dict[str, str]:
        """What the functions and the operator see: the deployed functions' settings, pointed at the emulators."""
        cfg = self.cfg
        return {
            **os.environ,
            "PUBSUB_EMULATOR_HOST": pubsub_host,
            "STORAGE_EMULATOR_HOST": gcs_url,
            "GOOGLE_CLOUD_PROJECT": cfg.project,
            "LANDFALL_BUCKET": cfg.bucket,
            "LANDFALL_REQUEST_TOPIC": cfg.request_topic,
            "LANDFALL_DEAD_LETTER_SUBSCRIPTION": cfg.dead_letter_topic,
            "LANDFALL_RESULTS_TOPIC": cfg.results_topic,
            "LANDFALL_DETECTIONS_TOPIC": cfg.detections_topic,
            "LANDFALL_SCORE_REQUESTS_TOPIC": cfg.score_requests_topic,
            # The engine's jobs where they live on this machine: the state folder, or (vertex) the stand-in
            # JobService that `landfall operator` serves (landfall.local.vertex_controller) at this address.
            "LANDFALL_BACKEND": backend_for(cfg.engine),
            "LANDFALL_VERTEX_ENDPOINT": f"http://127.0.0.1:{emulators.free_ports(1)[0]}",
            "LANDFALL_ENGINE": cfg.engine,
            "LANDFALL_LOCAL_STATE": str(local_state),
            "LANDFALL_WORKERS": str(cfg.workers),
            "LANDFALL_GPUS_PER_WORKER": "0",
            "LANDFALL_EPOCHS": str(cfg.epochs),
            "LANDFALL_BATCH_SIZE_PER_WORKER": str(cfg.batch_size_per_worker),
            "LANDFALL_TRAINER_ARGS": json.dumps(list(cfg.trainer_args)),
            "LANDFALL_TRAINER_IMAGE": "local",
            "LANDFALL_JOBS_BACKEND": "local",  # the local operator plays Cloud Run (landfall.local.executions)
            **({"LANDFALL_INLINE_MAX_BYTES": str(cfg.inline_max_bytes)} if cfg.inline_max_bytes is not None else {}),
            **({"LANDFALL_TASK_BYTES": str(cfg.task_bytes)} if cfg.task_bytes is not None else {}),
            "PYTHONUNBUFFERED": "1",
        }

    def _start_functions(self, state: Path) -> dict[str, int]:
        """One functions-framework server per entry point of ``functions/main.py``; returns their ports."""
        ports = {}
        for target, port, source in (("on_data_arrival", self.cfg.arrival_port, MAIN),
                                     ("on_training_request", self.cfg.submit_port, MAIN),
                                     ("on_score_request", self.cfg.scorer_port, SCORER)):
            port = port or emulators.free_port()
            proc = emulators.spawn(target, [sys.executable, "-m", "functions_framework", "--target", target,
                                            "--source", str(source), "--signature-type", "cloudevent",
                                            "--host", "127.0.0.1", "--port", str(port)], state / "logs", self.env)
            self.procs.append(proc)
            emulators.wait_http(proc, f"http://127.0.0.1:{port}/", timeout=60)
            ports[target] = port
        return ports

    def _subscribe_functions(self, ports: dict[str, int]) -> None:
        """Push subscriptions, as Eventarc and Pub/Sub push to the deployed functions (with the dead-letter policy)."""
        cfg = self.cfg
        pubsub = PubSub(cfg.project)
        _admin("create subscription on-data-arrival", pubsub.ensure_subscription, "on-data-arrival",
               cfg.notification_topic, ack_deadline_s=600,
               push_endpoint=f"http://127.0.0.1:{ports['on_data_arrival']}/")
        _admin("create subscription on-training-request", pubsub.ensure_subscription, "on-training-request",
               cfg.request_topic, ack_deadline_s=120, push_endpoint=f"http://127.0.0.1:{ports['on_training_request']}/",
               dead_letter_topic=cfg.dead_letter_topic, max_delivery_attempts=cfg.max_delivery_attempts,
               ordering=True)  # an optimisation only, as deployed
        # The scorer's two inputs, as infra/ declares them (ack deadline, dead-letter policy).
        for name, topic in (("landfall-scorer-arrivals", cfg.request_topic),
                            ("landfall-scorer-rescore", cfg.score_requests_topic)):
            _admin(f"create subscription {name}", pubsub.ensure_subscription, name, topic, ack_deadline_s=600,
                   push_endpoint=f"http://127.0.0.1:{ports['on_score_request']}/",
                   dead_letter_topic=cfg.scorer_dead_letter_topic, max_delivery_attempts=cfg.max_delivery_attempts)

    def check(self) -> str | None:
        """The name of a process that died, if any."""
        for p in self.procs:
            if p.popen.poll() is not None:
                return f"{p.name} (exit {p.popen.returncode}, log {p.log})"
        return None

    def stop(self) -> None:
        # Consumers first (operator, functions), then the emulators they talk to.
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.stop(timeout=20 if proc.name == "operator" else 10)
        self.procs = []
        lock = self.cfg.state / "stack.json"
        with contextlib.suppress(FileNotFoundError, ValueError):
            if json.loads(lock.read_text()).get("pid") == os.getpid():
                lock.unlink()

    def exports(self) -> str:
        i = self.info
        return "\n".join([
            f"export PUBSUB_EMULATOR_HOST={i['pubsub_emulator_host']}",
            f"export STORAGE_EMULATOR_HOST={i['storage_emulator_host']}",
            f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE={i['storage_emulator_host']}/",
            f"export GOOGLE_CLOUD_PROJECT={i['project']}",
            f"export LANDFALL_BUCKET={i['bucket']}",
            f"export LANDFALL_BACKEND={i.get('backend', 'local')}",
            *([f"export LANDFALL_VERTEX_ENDPOINT={i['vertex_endpoint']}"] if i.get("vertex_endpoint") else []),
            f"export LANDFALL_LOCAL_STATE={i['local_state']}",
            f"export LANDFALL_ENGINE={i.get('engine', 'tfjob')}",
        ])

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_signal(stack: Stack, poll_s: float = 1.0) -> int:
    """Blocks until SIGINT/SIGTERM (returns 0) or until a stack process dies (returns 1)."""
    stopping = {"sig": 0}

    def handler(signum: int, _frame: Any) -> None:
        stopping["sig"] = signum

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    while not stopping["sig"]:
        dead = stack.check()
        if dead:
            print(f"landfall up: {dead} stopped unexpectedly; shutting down", file=sys.stderr)
            return 1
        time.sleep(poll_s)
    return 0
