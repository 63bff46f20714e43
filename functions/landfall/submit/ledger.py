"""The submit stage's records in the bucket: pending requests, each dataset's jobs, and their inputs.

- ``gs://B/requests/<D>/pending/<request_id>.json``: a request not yet covered by a released job (the
  request as received). Written on receipt, deleted once a released job covers it. A waiting follow-up
  *is* this set: no TFJob waits suspended (Kueue owns ``suspend``), so the set is bounded by what waits.
  Its custom metadata ``recorded_at`` is when it was recorded, on the stage's clock (seconds since the epoch;
  a record without it: its generation's write time), so the retrain policy's quiet period is decided from a
  listing, without reading the records.
- ``gs://B/received/<D>/<request_id>.json``: this request was recorded pending before (it is written
  after the pending record, create-only, and never removed; the bucket's lifecycle deletes it after
  Pub/Sub's longest retention). A later delivery of the same request, however late, is a duplicate,
  even once the job that covered it is TTL-deleted and later jobs have run. Read by name only, never
  listed, so nothing grows with history.
- ``gs://B/runs/<job>/inputs.json`` (``landfall.inputs/v1``): what job ``seq`` of a dataset trains on.
  Created once (``ifGenerationMatch=0``) when the job is released; whoever creates it released the job,
  so of any number of concurrent releasers exactly one wins. Job ``seq+1`` is only ever created by one
  who saw job ``seq`` finished, so a dataset's released jobs are numbered 1, 2, 3... without gaps.
- ``gs://B/runs/<job>/submitted.json``: the TFJob was created. A released job whose TFJob is missing is
  created again (a crash between the two), unless this says it was created: then it ended and was
  deleted (TTL, or by hand), which counts as finished.
- ``gs://B/requests/<D>/head.json``: a hint, the newest ``seq`` seen. Never trusted: the head is found by
  probing ``inputs.json`` of ``seq+1, seq+2...`` from it, so a stale or lost hint costs a few reads.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from landfall.core.contracts.layout import Layout, gs
from landfall.core.contracts.messages import JobInputs, TrainingRequest
from landfall.core.errors import Invalid, NotFound
from landfall.core.services.storage import ObjectInfo, Storage
from landfall.submit import jobmeta

DELETE_WORKERS = 16
RECORDED_AT = "recorded_at"


def recorded_at(info: Any) -> float:
    """When a pending record was recorded: its ``recorded_at`` metadata, else its generation (write time, in µs)."""
    try:
        return float((info.metadata or {})[RECORDED_AT])
    except (KeyError, TypeError, ValueError):
        return float(info.generation) / 1e6


@dataclasses.dataclass(frozen=True)
class Ledger:
    storage: Storage
    bucket: str
    layout: Layout
    clock: Callable[[], float] = time.time  # the retrain policy's time (a test passes a fake clock)

    # -- pending requests ---------------------------------------------------------------------------------
    def _pending_prefix(self, dataset: str) -> str:
        return gs(self.bucket, f"{self.layout.requests_prefix}{dataset}/pending/")

    def add_pending(self, request: TrainingRequest) -> None:
        self.storage.write_bytes(self._pending_prefix(request.dataset) + f"{request.request_id}.json",
                                 request.to_json(), content_type="application/json",
                                 metadata={RECORDED_AT: repr(self.clock())})

    def _received_uri(self, request: TrainingRequest) -> str:
        return gs(self.bucket, f"{self.layout.received_prefix}{request.dataset}/{request.request_id}.json")

    def record(self, request: TrainingRequest) -> None:
        """Pending first, then received: a request found received was pending once, so it waits for the
        next release or a released job covered it."""
        self.add_pending(request)
        self.storage.create(self._received_uri(request), request.to_json(), content_type="application/json")

    def was_received(self, request: TrainingRequest) -> bool:
        return self.storage.exists(self._received_uri(request))

    def pending(self, dataset: str) -> list[TrainingRequest]:
        """The dataset's pending requests, oldest first (a request that vanished meanwhile is skipped)."""
        return [request for request, _ in self.pending_since(dataset)]

    def pending_since(self, dataset: str) -> list[tuple[TrainingRequest, float]]:
        """The pending requests, oldest first, each with when it was recorded (seconds since the epoch: the
        record's generation, which Cloud Storage sets from its write time in microseconds).

        The records are read ``DELETE_WORKERS`` at a time: a release after a burst of 2,000 requests reads 2,000
        small objects, minutes one after another at Cloud Storage's tens of milliseconds each."""
        infos = sorted(self.storage.list_objects(self._pending_prefix(dataset), suffix=".json"),
                       key=lambda i: (i.generation, i.uri))

        def read(info: ObjectInfo) -> tuple[TrainingRequest, float] | None:
            try:
                return TrainingRequest.from_message(self.storage.read_bytes(info.uri)), recorded_at(info)
            except NotFound:
                return None  # covered and removed by a concurrent release
            except Invalid:
                self.storage.delete(info.uri)  # not ours to keep: it could never be covered
                return None

        with concurrent.futures.ThreadPoolExecutor(min(DELETE_WORKERS, max(1, len(infos)))) as pool:
            return [r for r in pool.map(read, infos) if r is not None]  # map keeps the listing's order

    def pending_times(self, dataset: str) -> list[float]:
        """When each pending request was recorded, from one listing (no record is read)."""
        return [recorded_at(i) for i in self.storage.list_objects(self._pending_prefix(dataset), suffix=".json")]

    def drop_pending(self, dataset: str, request_ids: list[str]) -> None:
        self.storage.delete_many([self._pending_prefix(dataset) + f"{rid}.json" for rid in request_ids],
                                 DELETE_WORKERS)

    def datasets_with_pending(self) -> list[str]:
        prefix = gs(self.bucket, self.layout.requests_prefix)
        names = self.storage.list(prefix, suffix=".json")
        return sorted({u[len(prefix):].split("/", 1)[0] for u in names if "/pending/" in u})

    # -- released jobs -----------------------------------------------------------------------------------
    def job_name(self, dataset: str, seq: int) -> str:
        return jobmeta.job_name(dataset, f"seq:{seq}")

    def inputs_uri(self, job: str) -> str:
        return jobmeta.job_dir(self.bucket, job, self.layout.runs_prefix) + "/inputs.json"

    def _submitted_uri(self, job: str) -> str:
        return jobmeta.job_dir(self.bucket, job, self.layout.runs_prefix) + "/submitted.json"

    def _hint_uri(self, dataset: str) -> str:
        return gs(self.bucket, f"{self.layout.requests_prefix}{dataset}/head.json")

    def head_seq(self, dataset: str) -> int:
        """The newest released job's number (0: none yet): from the hint, then probing forward."""
        try:
            seq = int(json.loads(self.storage.read_bytes(self._hint_uri(dataset)))["seq"])
        except (NotFound, ValueError, KeyError, TypeError):
            seq = 0
        while self.storage.exists(self.inputs_uri(self.job_name(dataset, seq + 1))):
            seq += 1
        return seq

    def read_inputs(self, job: str) -> JobInputs:
        uri = self.inputs_uri(job)
        return JobInputs.from_json(self.storage.read_bytes(uri), uri)

    def create_inputs(self, inputs: JobInputs) -> bool:
        """Releases the job: False if someone else released this ``seq`` first."""
        if not self.storage.create(self.inputs_uri(inputs.job), inputs.to_json(), content_type="application/json"):
            return False
        if inputs.seq:  # numbered jobs only (not the per-request jobs of policy allow)
            self.storage.write_bytes(self._hint_uri(inputs.dataset), json.dumps({"seq": inputs.seq}).encode(),
                                     content_type="application/json")
        return True

    def mark_submitted(self, job: str) -> None:
        self.storage.create(self._submitted_uri(job), b"{}", content_type="application/json")

    def was_submitted(self, job: str) -> bool:
        return self.storage.exists(self._submitted_uri(job))


def request_entry(request: TrainingRequest) -> dict[str, Any]:
    """A request as a job's ``inputs.json`` lists it; ``arrived_at`` lets the trainer log how long the oldest
    request waited for the job to start (``trainer.task``'s ``job started`` line, a log-based metric)."""
    return {"request_id": request.request_id, "reason": request.reason, "manifest": request.manifest,
            "arrived_at": request.arrived_at}
