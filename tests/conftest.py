"""Shared, session-scoped emulators: Google's Pub/Sub emulator and fake-gcs-server.

Started once per test session on free loopback ports; a failure to start is an error, never a skip.
fake-gcs-server announces every finalized ``incoming/`` object on ``GCS_TOPIC`` (JSON_API_V1
notifications), as ``gcloud storage buckets notifications create`` does in production.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.local import emulators

# The release's enough-data hold (landfall.submit.sufficient) is off for the suite's coalescing tests, whose
# arrivals are a few instances at the default batch of 1,024; its own tests (tests/landfall/submit/
# test_enough_data.py) turn it on.
os.environ.setdefault("LANDFALL_MIN_DATA", "off")
# One TensorFlow intra-op thread per process (and two inter-op threads: MultiWorkerMirroredStrategy's collectives
# need more than one): ``make test`` runs two xdist workers on the 2-core machine and a test often runs a two-worker
# cluster, so four TensorFlow processes share two cores, and threads beyond them only spin and switch (Eigen's pool
# spins before it sleeps). The whole suite: 775.6 s of pytest with these against 885.6 s without (docs/benchmarks.md,
# "The test suite's time"). Set in the environment, so every trainer process a test starts inherits it too.
for _name, _value in (("TF_NUM_INTRAOP_THREADS", "1"), ("TF_NUM_INTEROP_THREADS", "2"), ("OMP_NUM_THREADS", "1")):
    os.environ.setdefault(_name, _value)

PROJECT = "landfall-test"
GCS_TOPIC = "gcs-notifications"


@dataclasses.dataclass
class Emulators:
    project: str
    pubsub_host: str
    storage_url: str
    gcs_topic: str
    storage: Storage
    pubsub: PubSub

    def env(self) -> dict[str, str]:
        return {
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
            "STORAGE_EMULATOR_HOST": self.storage_url,
            "GOOGLE_CLOUD_PROJECT": self.project,
        }


SHARED_MEMORY = Path("/dev/shm")


@pytest.fixture(scope="session")
def memory_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder in memory (the tmpfs at ``/dev/shm``) for what the emulators store, removed when the session ends;
    under pytest's temporary folder where there is no such tmpfs (macOS).

    fake-gcs-server writes every object through ``renameio``, which fsyncs it: on the 2-core machine's disk the
    suite's tens of thousands of small objects stalled on I/O (``/proc/pressure/io``: 37 % of test_scale's time),
    and ``tests/landfall/submit/test_scale.py`` alone took 137.8 s with the emulator's data on disk against 89.4 s
    in memory (docs/benchmarks.md, "The test suite's time"). Nothing under test depends on the emulator's
    durability. Bulky inputs (the converter's memory tests) stay on disk under ``tmp_path``."""
    if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="landfall-tests-", dir=SHARED_MEMORY))
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("memory")


@pytest.fixture
def memory_dir(memory_root: Path) -> Iterator[Path]:
    """A fresh folder under ``memory_root`` for one test (a ``landfall up`` state folder), removed after it."""
    path = Path(tempfile.mkdtemp(dir=memory_root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def emulator_stack(memory_root: Path) -> Iterator[Emulators]:
    state = memory_root / "emulators"
    state.mkdir()
    pubsub_proc, pubsub_host = emulators.start_pubsub(state, PROJECT)
    saved = {k: os.environ.get(k) for k in ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
    os.environ["PUBSUB_EMULATOR_HOST"] = pubsub_host
    os.environ["GOOGLE_CLOUD_PROJECT"] = PROJECT
    gcs_proc = None
    try:
        pubsub = PubSub(PROJECT)
        pubsub.ensure_topic(GCS_TOPIC)
        gcs_proc, storage_url = emulators.start_gcs(
            state, pubsub_host=pubsub_host, project=PROJECT, topic=GCS_TOPIC, object_prefix="incoming/"
        )
        os.environ["STORAGE_EMULATOR_HOST"] = storage_url
        yield Emulators(PROJECT, pubsub_host, storage_url, GCS_TOPIC, Storage(PROJECT), pubsub)
    finally:
        if gcs_proc:
            gcs_proc.stop()
        pubsub_proc.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def bucket(emulator_stack: Emulators) -> str:
    """A fresh bucket per test, so tests sharing the emulators never see each other's objects."""
    name = unique("bkt")
    emulator_stack.storage.ensure_bucket(name)
    return name


@pytest.fixture
def topic(emulator_stack: Emulators) -> str:
    """A fresh request topic with a pull subscription of the same name."""
    name = unique("requests")
    emulator_stack.pubsub.ensure_topic(name)
    emulator_stack.pubsub.ensure_subscription(name, name, ordering=True)
    return name


@pytest.fixture
def detections_topic(emulator_stack: Emulators) -> str:
    """A fresh detections topic (what the scorer publishes, landfall.detect) with a pull subscription of the same
    name."""
    name = unique("detections")
    emulator_stack.pubsub.ensure_topic(name)
    emulator_stack.pubsub.ensure_subscription(name, name)
    return name


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def arrival_runtime(emulator_stack: Emulators, topic: str):
    """Builds the data-arrival runtime against the emulators, publishing to this test's topic."""
    from landfall.arrival.config import ConverterConfig
    from landfall.core.contracts.layout import Layout
    from landfall.core.runtime import Runtime

    def make(**overrides) -> Runtime:
        cfg = ConverterConfig.load({}, project=emulator_stack.project, request_topic=topic, **overrides)
        return Runtime(cfg, Layout(), emulator_stack.storage, emulator_stack.pubsub)

    return make


def pull_all(pubsub: PubSub, subscription: str, expect: int | None = None, timeout_s: float = 10.0) -> list:
    """Pulls and acks until ``expect`` messages arrived (or, with ``expect=None``, until a pull comes back empty)."""
    import time

    got: list = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = pubsub.pull(subscription, timeout_s=2.0)
        pubsub.ack(subscription, [m.ack_id for m in batch])
        got += batch
        if expect is not None and len(got) >= expect:
            break
        if expect is None and not batch:
            break
    return got


@pytest.fixture(scope="session")
def small_flow(emulator_stack: Emulators, tmp_path_factory: pytest.TempPathFactory):
    """One small real flow with every kind of record (``tests/flow.py``): trace, report and monitoring tests."""
    from tests.flow import build

    return build(emulator_stack, tmp_path_factory.mktemp("flow"))


# -- the order tests reach pytest-xdist's workers ---------------------------------------------------------------
# ``make test`` runs on TEST_WORKERS processes with ``--dist worksteal``: each worker first gets a contiguous share of
# the collected tests (the first 1/n, the next 1/n ...) and an idle one later takes half of the longest queue's tail.
# Left in file order, the heaviest modules (two-worker TensorFlow clusters, the 10,000-arrival scale test) can land
# on one worker, or start last and run on alone. So with more than one worker the modules are dealt as units: the
# heavy ones first, each to the share with the least estimated time so far (longest processing time first), then the
# light ones, each to the share with the fewest tests, so the shares are as long as xdist cuts them; within a share,
# heaviest first, so what is left to steal at the end is light. Modules that share a session fixture travel
# together (``small_flow``: built once per worker that runs one of them). Order only: every test still runs.
# Seconds: each module's summed test time (setup included) from the junit report of a fresh clone's `make test`
# (2026-12-07 22:57, quiet; the demo's after its Vertex AI run became one job), the modules of 10 s or more; only to
# rank them: a module not listed counts 0.3 s a test.
MODULE_SECONDS = {
    "tests/infra/test_images.py": 279, "tests/landfall/local/test_operator.py": 190,
    "tests/trainer/test_distributed.py": 178, "tests/landfall/local/test_demo.py": 140,
    "tests/landfall/local/test_vertex_training.py": 89, "tests/landfall/arrival/test_reference_burst.py": 86,
    "tests/trainer/test_stopping.py": 79, "tests/landfall/local/test_stack.py": 77,
    "tests/trainer/test_crash_after_fit.py": 72, "tests/landfall/submit/test_scale.py": 58,
    "tests/trainer/test_warmstart.py": 43, "tests/landfall/arrival/test_handler.py": 43,
    "tests/landfall/local/test_two_datasets.py": 41, "tests/trainer/test_champion_view.py": 36,
    "tests/landfall/cli/test_convert.py": 35, "tests/trainer/test_transport.py": 32,
    "tests/landfall/cli/test_hostile_views.py": 32, "tests/trainer/test_verdict.py": 31,
    "tests/landfall/cli/test_status_verdict.py": 29, "tests/bench/test_training_bench.py": 28,
    "tests/landfall/cli/test_score.py": 28, "tests/trainer/test_labelled_check.py": 28,
    "tests/functions/test_archive.py": 27, "tests/landfall/cli/test_score_series.py": 26,
    "tests/landfall/submit/test_handler.py": 21, "tests/infra/test_monitoring.py": 17,
    "tests/trainer/test_windows.py": 15, "tests/bench/test_stress_bench.py": 15, "tests/infra/test_checkov.py": 15,
    "tests/landfall/core/test_vus.py": 14, "tests/trainer/test_preemption.py": 14,
    "tests/trainer/test_strategy.py": 13, "tests/trainer/test_tf_upgrade.py": 13,
    "tests/landfall/submit/test_interleavings.py": 13, "tests/landfall/arrival/test_hostile_files.py": 13,
    "tests/trainer/test_baselines.py": 13, "tests/trainer/test_inputs.py": 11,
    "tests/landfall/arrival/test_compact.py": 10, "tests/trainer/test_bad_inputs.py": 10,
    "tests/landfall/detect/test_interleavings.py": 10,
}
TRAVEL_TOGETHER = [("tests/infra/test_monitoring.py", "tests/landfall/cli/test_trace.py",
                    "tests/landfall/local/test_report.py")]  # small_flow
LIGHT_TEST_SECONDS = 0.3


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def dealt(items: list, shares: int) -> list:
    """``items`` reordered for ``shares`` workers as above (every item kept, each module's own order kept)."""
    units: dict[str, list] = {}
    together = {m: group[0] for group in TRAVEL_TOGETHER for m in group}
    for item in items:
        module = _module_of(item)
        units.setdefault(together.get(module, module), []).append(item)

    def seconds(unit: list) -> float:
        return sum(MODULE_SECONDS.get(m, LIGHT_TEST_SECONDS * n) for m, n in
                   collections.Counter(_module_of(i) for i in unit).items())

    heavy = sorted((u for u in units.values() if seconds(u) >= 10), key=seconds, reverse=True)
    light = [u for u in units.values() if seconds(u) < 10]
    parts: list[list[list]] = [[] for _ in range(shares)]
    load = [0.0] * shares
    for unit in heavy:
        k = min(range(shares), key=lambda i: load[i])
        parts[k].append(unit)
        load[k] += seconds(unit)
    for unit in light:
        k = min(range(shares), key=lambda i: (sum(map(len, parts[i])), load[i]))
        parts[k].append(unit)
        load[k] += seconds(unit)
    return [item for part in parts for unit in sorted(part, key=seconds, reverse=True) for item in unit]


# -- ``make check``: the edit loop's quicker subset (issue #67) --------------------------------------------------------
# ``pytest --quick`` leaves out the modules of QUICK_LEAVES_OUT seconds or more in MODULE_SECONDS (the two-worker
# clusters, the demo, the scale and burst tests, the image rehearsals), and says how many tests it left out. It is an
# addition for the edit loop: ``make test`` (what CI and the README's quickstart run) is always the whole suite.
QUICK_LEAVES_OUT = 30


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--quick", action="store_true", help="leave out the heaviest modules (make check); make test "
                     "runs everything")


def heavy_modules() -> set[str]:
    return {m for m, s in MODULE_SECONDS.items() if s >= QUICK_LEAVES_OUT}


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if config.getoption("--quick"):  # the tests left out are counted in pytest's own "deselected"
        heavy = heavy_modules()
        left = [i for i in items if _module_of(i) in heavy]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = [i for i in items if _module_of(i) not in heavy]
    shares = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if shares > 1:
        items[:] = dealt(items, shares)


# -- the suite's time, beside its goal, at the end of every run (issue #67) -------------------------------------------
# A fresh clone's ``make test`` on the 2-core development machine: pytest within 15 minutes. Printed by the run that
# reports (xdist's controller), so growth is seen the day it happens.
SUITE_GOAL_S = 15 * 60
STARTED = pytest.StashKey[float]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = time.monotonic()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or STARTED not in config.stash:  # an xdist worker: the controller reports
        return
    took = time.monotonic() - config.stash[STARTED]
    verdict = "within it" if took <= SUITE_GOAL_S else f"OVER it by {took - SUITE_GOAL_S:.0f} s"
    spent = by_folder(r for reports in terminalreporter.stats.values() for r in reports)
    total = sum(spent.values())
    if total and len(spent) > 1:
        terminalreporter.write_line("where it went (the tests' own seconds, setup and teardown included, summed over "
                                    "the workers): " + ", ".join(f"{folder} {s:.0f} s ({100 * s / total:.0f} %)"
                                                                 for folder, s in spent.most_common()))
    if config.getoption("--quick", False):
        terminalreporter.write_line(f"make check: the quick subset, {len(heavy_modules())} heavy modules left out; "
                                    "`make test` runs the whole suite")
        return
    terminalreporter.write_line(f"the suite's time: {took:.0f} s of pytest, the goal {SUITE_GOAL_S} s on the 2-core "
                                f"machine (issue #67): {verdict}")


def by_folder(reports) -> collections.Counter:
    """Each test folder's seconds (``tests/landfall/local``, ``tests/trainer`` ...: a module's folder, at most three
    deep) over the reports of a run: every phase of every test (setup, call, teardown), so a fixture's time counts
    where the test that first needed it ran."""
    spent: collections.Counter = collections.Counter()
    for report in reports:
        nodeid, duration = getattr(report, "nodeid", ""), getattr(report, "duration", None)
        if not nodeid or duration is None or getattr(report, "when", None) not in ("setup", "call", "teardown"):
            continue
        parts = nodeid.split("::", 1)[0].split("/")[:-1][:3]
        spent["/".join(parts) or "."] += float(duration)
    return spent
