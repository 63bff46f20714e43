"""#39, "No hot objects": a burst of 1,000 arrivals on one dataset under Cloud Storage's write rate to one object name
(one a second, ``tests/fakes/gcs_rate.RULE``), enforced in front of fake-gcs-server: every arrival is converted,
screened and trained exactly once, no event is retried more than a few times, and the reference holds exactly the
merge of every admitted profile (docs/datasets.md#arrival-checks, "The reference")."""

from __future__ import annotations

import collections
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from landfall.arrival import converter, screen
from landfall.arrival.config import ConverterConfig
from landfall.core.contracts import layout
from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import TrainingRequest
from landfall.core.errors import TemporaryError
from landfall.core.quality import quarantine
from landfall.core.quality.profile import Profile
from landfall.core.services.storage import Storage
from landfall.local.synthetic import time_series
from landfall.submit import coalesce, jobmeta
from landfall.submit.backends.kubernetes import KubeBackend
from tests.fakes.gcs_rate import RULE, rate_limited_client
from tests.fakes.kube_api import FakeKubeAPI
from tests.support import inputs_of, runtime, set_state


def rate_limited_storage(project: str, retry_deadline_s: float):
    """``Storage`` on the emulator through the write-rate fake (``tests.fakes.gcs_rate``), and the fake's session."""
    client, session = rate_limited_client(project)
    return Storage(project, client=client, retry_deadline_s=retry_deadline_s), session

BURST = int(os.environ.get("LANDFALL_BURST", "1000"))
WORKERS = 8  # concurrent function instances
MAX_RETRIES = 3  # "no event retried more than a few times"
DATASET = "burst"


def test_a_burst_of_1000_arrivals_under_the_write_rate_of_one_object_name(emulator_stack, bucket, tmp_path):
    storage, session = rate_limited_storage(emulator_stack.project, retry_deadline_s=5.0)
    cfg = ConverterConfig.load({})
    sources = []
    for k in range(8):  # eight distinct bodies, uploaded as 1,000 objects
        sources.append(tmp_path / f"s{k}.npy")
        np.save(sources[-1], time_series(16, seed=k))
    retries: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def event(k: int, handle) -> str:
        for attempt in range(MAX_RETRIES + 1):
            try:
                return handle(k)
            except TemporaryError:  # the platform redelivers the event
                with lock:
                    retries[k] += 1
                if attempt == MAX_RETRIES:
                    raise
                time.sleep(0.2 * 2 ** attempt)
        raise AssertionError

    def request(k: int) -> TrainingRequest:
        name = f"incoming/{DATASET}/part-{k}.npy"
        aid = layout.arrival_id(name, k + 1)
        return TrainingRequest(DATASET, layout.gs(bucket, layout.manifest_name(Layout(), DATASET, aid)),
                               layout.request_id(bucket, name, k + 1))

    def arrive(k: int) -> str:
        """What the arrival function does with one object: convert (screened), then settle."""
        req = request(k)
        out = req.manifest.rsplit("/", 1)[0] + "/"
        manifest = converter.convert(str(sources[k % len(sources)]), out, DATASET, cfg, storage,
                                     arrival_id=out.rstrip("/").rsplit("/", 1)[1])
        screen.settle(storage, manifest, req.manifest)
        return manifest.checks["status"]

    with FakeKubeAPI() as api:
        backend = KubeBackend.for_host(api.host)
        rt = runtime(emulator_stack, bucket, backend)

        def submit(k: int) -> str:
            return coalesce.submit(request(k), rt.config, backend, storage, rt.layout).outcome

        assert event(0, arrive) == "first" and event(0, submit) == "submitted"
        (job1,) = backend.list(DATASET)
        set_state(backend, jobmeta.name_of(job1), "Running")

        started = time.monotonic()
        with ThreadPoolExecutor(WORKERS) as pool:
            statuses = list(pool.map(lambda k: (event(k, arrive), event(k, submit)), range(1, BURST)))
        seconds = time.monotonic() - started
        assert all(outcome == "coalesced" for _, outcome in statuses)

        set_state(backend, jobmeta.name_of(job1), "Succeeded")
        assert coalesce.reconcile(backend, storage, rt.config, rt.layout) != []
        (job2,) = [j for j in backend.list(DATASET) if jobmeta.name_of(j) != jobmeta.name_of(job1)]
        inputs = inputs_of(storage, job2)
        # trained exactly once: every arrival's manifest in the follow-up, once; each screened once (one manifest)
        assert sorted(inputs.manifest_uris) == sorted(request(k).manifest for k in range(BURST))
        assert len(inputs.requests) == BURST - 1

    # the burst's tail joins the reference at the next turn (the next arrival, a cadence on)
    time.sleep(quarantine.CADENCE_S)
    quarantine.refresh_reference(storage, layout.gs(bucket, layout.dataset_prefix(Layout(), DATASET)))
    admitted = [k for k, (s, _) in enumerate([("first", None), *statuses]) if s != "quarantined"]
    expected = Profile(cfg.features)
    for k in admitted:
        folder = request(k).manifest.rsplit("/", 1)[0]
        expected.merge(Profile.from_json(storage.read_bytes(folder + "/profile.json"))[0])
    uri = layout.gs(bucket, layout.dataset_prefix(Layout(), DATASET) + "_reference.json")
    reference, _ = Profile.from_json(storage.read_bytes(uri))
    got, want = reference.to_dict(), expected.to_dict()
    assert reference.arrivals == len(admitted) == expected.arrivals and reference.rows == expected.rows
    assert {k: v for k, v in got.items() if not isinstance(v, float | list | dict)} == \
        {k: v for k, v in want.items() if not isinstance(v, float | list | dict)}
    np.testing.assert_allclose(reference.mean(), expected.mean(), rtol=1e-9)
    np.testing.assert_allclose(reference.std(), expected.std(), rtol=1e-9)
    for f in range(cfg.features):
        for a, b in zip(reference.histogram(f), expected.histogram(f), strict=True):
            np.testing.assert_array_equal(a, b)

    # no object written twice within a second (the fake refused those), and how often it had to
    ref_name = (bucket, uri.split("/", 3)[3])
    hot = {name: n for name, n in session.writes.items() if n > 1}
    per_event = [retries[k] for k in range(BURST)]
    print(f"\n{BURST} arrivals in {seconds:.1f} s: {BURST / seconds:.1f} arrivals/s, {WORKERS} workers; "
          f"retries per event: max {max(per_event)}, mean {np.mean(per_event):.3f}, "
          f"{sum(1 for r in per_event if r)} events retried; reference written {session.writes[ref_name]} times "
          f"(min gap {session.closest.get(ref_name, float('nan')):.2f} s), 429s refused per name: "
          f"{dict(session.refused.most_common(5))}; objects written more than once: {len(hot)}; rule: {RULE}")
    assert max(per_event) <= MAX_RETRIES
    assert all(gap >= RULE["per_seconds"] for gap in session.closest.values())
    assert session.writes[ref_name] <= seconds / quarantine.CADENCE_S + 2


def test_the_fake_refuses_a_second_write_to_a_name_within_a_second_and_it_is_temporary(emulator_stack, bucket):
    import pytest

    storage, session = rate_limited_storage(emulator_stack.project, retry_deadline_s=0.3)
    uri = f"gs://{bucket}/x/a.json"
    storage.write_bytes(uri, b"1")
    storage.write_bytes(f"gs://{bucket}/x/b.json", b"1")  # another name: its own rate
    with pytest.raises(TemporaryError, match=r"429|Too Many|rate limit"):
        storage.write_bytes(uri, b"2")
    assert storage.read_bytes(uri) == b"1" and session.refused[(bucket, "x/a.json")] >= 1
    time.sleep(RULE["per_seconds"])
    storage.write_bytes(uri, b"3")
    assert storage.read_bytes(uri) == b"3" and session.writes[(bucket, "x/a.json")] == 2
