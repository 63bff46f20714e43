"""The reconciler's half of "every finished job is announced once" (``landfall.core.artifacts.results``).

The chief announces the run it finished (``trainer.judging.verdict.publish_result``). A job can also end without a
chief to do so: its pods were killed, its retries ran out, its deadline passed, or the chief died between
its last write and the publish. Each pass therefore looks at the finished TFJobs (``Succeeded`` or ``Failed``;
the list is bounded by their ``ttlSecondsAfterFinished``) and, for each whose ``runs/<job>/result.json`` is
missing or incomplete, sends the result built from its ``metrics.json`` (or from nothing, for a job that
died before writing any) through the same create-only marker. Its cost is the chief's ``gpu_seconds`` when
``metrics.json`` holds them, else estimated from the job object's start and end times, workers and GPUs
(``cost_basis: job_object``, ``landfall.submit.spend.estimate``). One read per finished job per pass when there
is nothing to do. A TFJob is finished only once its processes have exited, so the chief cannot still be
publishing when the reconciler looks.
"""

from __future__ import annotations

import logging
from typing import Any

from landfall.core.artifacts import results
from landfall.core.contracts.layout import Layout
from landfall.core.errors import LandfallError, TemporaryError
from landfall.core.services.storage import Storage
from landfall.submit import engine, jobmeta, spend
from landfall.submit.config import JobConfig

log = logging.getLogger("landfall.reconcile.announce")


def _failure(job: dict[str, Any]) -> str:
    for c in reversed(engine.conditions(job)):
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("message") or c.get("reason") or "failed")
    return "failed"


def announce_finished(backend: Any, storage: Storage, pubsub: Any, cfg: JobConfig, layout: Layout | None = None,
                      dataset: str | None = None) -> list[str]:
    """Sends the result of every finished job that has none yet; returns the jobs announced now.

    A job whose announcement fails for a temporary reason is left for the next pass; the others go on."""
    if not cfg.results_topic:
        return []
    layout = layout or Layout()
    sent = []
    for job in backend.list(dataset):
        if not engine.is_finished(job):
            continue
        name = jobmeta.name_of(job)
        bucket = cfg.bucket or engine.bucket_of(job)
        if not bucket:
            continue
        job_dir = jobmeta.job_dir(bucket, name, layout.runs_prefix)
        try:
            marker = results.read_marker(storage, job_dir)
            if marker and marker.get("published_at"):
                continue
            doc = spend.job_metrics(storage, job_dir)
            status = "succeeded" if engine.state(job) == "Succeeded" else "failed"
            message = results.from_metrics(
                doc, job=name, dataset=str(job.get("metadata", {}).get("labels", {}).get(jobmeta.DATASET_LABEL) or ""),
                status=status, inputs_uri=jobmeta.inputs_of(job) or None, storage=storage, published_by="reconciler",
                error=None if status == "succeeded" else str(doc.get("error") or _failure(job)),
                estimate=spend.estimate(job, cfg)[0])
            if results.announce(storage, pubsub, cfg.results_topic, job_dir, message):
                sent.append(name)
        except TemporaryError as exc:
            log.warning("result of %s not sent (will retry): %s", name, exc, extra={"job": name})
        except LandfallError as exc:
            log.error("result of %s not sent: %s", name, exc, extra={"job": name})
    return sent
