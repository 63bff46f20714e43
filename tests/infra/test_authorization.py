"""A deploy that works the first time: every workload's operations, authorized as Google Cloud would.

For each workload, the operations its code performs are listed as (permission, resource), read off its code paths;
so is a set it must never be able to perform. Both are checked against the grants infra/ declares
(``iam_terraform.grants``) with the platform's published rules (``gcp_rules``): resource attributes only where
the service recognizes them, ``storage.objects.list`` on the bucket, role permissions from Google's ``roles.get``.
The three grants this replaced (conditions Cloud Run and Cloud Functions ignore) are put back in a scratch copy
of infra/ to show the check fails on each.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from . import gcp_rules as gcp
from .gcp_rules import Grant, Policy, Resource
from .iam_terraform import (
    BUCKET,
    ENGINES,
    FUNCTIONS,
    JOB,
    NUMBER,
    PROJECT,
    PUBSUB_AGENT,
    RECONCILE_JOB,
    REGION,
    SCORER,
    SOURCES,
    STATE,
    custom_roles,
    grants,
)
from .tools import INFRA


def data(name: str) -> Resource:
    return gcp.obj(BUCKET, name)


DATA_BUCKET = gcp.bucket(BUCKET)
PROJ = gcp.project_level("cloudresourcemanager.googleapis.com", PROJECT, "Project")
CLUSTER = gcp.project_level("container.googleapis.com", PROJECT, "Cluster")
LOGS = gcp.project_level("logging.googleapis.com", PROJECT, "LogEntry")
REQUESTS, RESULTS = gcp.topic(PROJECT, "requests"), gcp.topic(PROJECT, "results")
GCF_STAGING = f"gcf-v2-sources-{NUMBER}-{REGION}"
Op = tuple[str, Resource, str]  # permission, resource, where in the code


def services() -> list[Resource]:
    return [gcp.run_service(PROJECT, REGION, f) for f in FUNCTIONS]


READS_ARRIVAL: list[Op] = [
    ("storage.objects.get", data("incoming/pump-7/2026-12-01.csv"), "arrival.handler: stat and read the object"),
    ("storage.objects.list", DATA_BUCKET, "arrival.retract: the older generations' manifests under tfrecords/<ds>/"),
    ("storage.objects.get", data("tfrecords/pump-7/a1/manifest.json"), "arrival: is the manifest there (done)"),
    ("storage.objects.create", data("tmp/pump-7/a1/att/part-0.tfrecord"), "arrival.shards: attempt-private shards"),
    ("storage.objects.delete", data("tmp/pump-7/a1/att/part-0.tfrecord"), "arrival.shards: moved out of tmp/"),
    ("storage.objects.create", data("tfrecords/pump-7/a1/part-00000-of-00001.tfrecord"), "shards: the move"),
    ("storage.objects.create", data("tfrecords/pump-7/a1/manifest.json"), "manifest, create-only, last"),
    ("storage.objects.create", data("tfrecords/pump-7/a0/retracted.json"), "arrival.retract: superseded"),
    ("storage.objects.create", data("rejected/pump-7/a1.json"), "core.artifacts.rejections: bad input"),
    ("pubsub.topics.publish", REQUESTS, "arrival.handler.after_conversion: the training request"),
]
BOOKKEEPING: list[Op] = [
    ("storage.objects.get", data("tfrecords/pump-7/a1/manifest.json"), "submit: read the request's manifest"),
    ("storage.objects.list", DATA_BUCKET, "submit.coalesce: list manifests and pending requests"),
    ("storage.objects.create", data("requests/pump-7/pending/r1.json"), "submit.ledger: pending record"),
    ("storage.objects.get", data("requests/pump-7/pending/r1.json"), "submit.ledger: read pending"),
    ("storage.objects.delete", data("requests/pump-7/pending/r1.json"), "submit.coalesce: covered, removed"),
    ("storage.objects.create", data("requests/pump-7/head.json"), "submit.ledger: the newest job hint"),
    ("storage.objects.update", data("requests/pump-7/head.json"), "submit.ledger: the hint rewritten"),
    ("storage.objects.create", data("received/pump-7/r1.json"), "submit.ledger: received, create-only"),
    ("storage.objects.get", data("received/pump-7/r1.json"), "submit.ledger: a redelivery is a duplicate"),
    ("storage.objects.create", data("runs/pump-7-3/inputs.json"), "submit.coalesce: release, create-only"),
    ("storage.objects.get", data("runs/pump-7-3/inputs.json"), "submit.coalesce: the winner's inputs"),
    ("storage.objects.create", data("runs/pump-7-3/submitted.json"), "submit.ledger: submitted record"),
    ("storage.objects.get", data("requests/pump-7/spend.json"), "submit.spend: the last day's jobs and spend"),
    ("storage.objects.create", data("requests/pump-7/spend.json"), "submit.spend: the first entry"),
    ("storage.objects.update", data("requests/pump-7/spend.json"), "submit.spend: rewritten, generation-guarded"),
    ("storage.objects.get", data("runs/pump-7-3/metrics.json"), "submit.spend: the ended head's gpu_seconds"),
]
# Dataset specs (landfall.core.artifacts.specs): every stage reads its dataset's by name (a metadata read, then the
# body).
SPEC = data("config/datasets/pump-7.json")
READS_SPEC: list[Op] = [("storage.objects.get", SPEC,
                         "core.artifacts.specs.for_dataset: the spec's generation and body")]
# Labelled evaluation sets (landfall.core.artifacts.labelled): `landfall datasets apply` stores them create-only,
# manifest
# last; the trainer reads the one its job names (--labelled).
LABELLED_SET = data(f"config/labelled/pump-7/{'ab' * 32}.npz")
LABELLED_MANIFEST = data(f"config/labelled/pump-7/{'ab' * 32}.json")
# Compaction and snapshots (landfall.arrival.compaction, landfall.core.artifacts.snapshots): the names the code writes.
SNAPSHOT = data("snapshots/pump-7/00000003.json")
NEXT_SNAPSHOT = data("snapshots/pump-7/00000004.json")
ATTEMPT = "compacted/pump-7/00000004-0a1b2c3d/"
OLD_PART = data("compacted/pump-7/00000003-9f8e7d6c/part-00000.json")
OLD_SHARD = data("compacted/pump-7/00000003-9f8e7d6c/part-00000.tfrecord")
ARRIVAL_SHARD = data("tfrecords/pump-7/a1/part-00000-of-00001.tfrecord")
COMPACTS: list[Op] = [
    ("storage.objects.list", DATA_BUCKET,
     "core.artifacts.snapshots.listed / arrival.compaction.pending_work: the listings"),
    ("storage.objects.get", SNAPSHOT, "core.artifacts.snapshots.latest: the newest snapshot"),
    ("storage.objects.get", OLD_PART, "core.artifacts.snapshots.read_shards: its parts"),
    ("storage.objects.create", data(ATTEMPT + "fence"), "arrival.compaction: the fence, before the listing"),
    ("storage.objects.get", data("tfrecords/pump-7/a1/manifest.json"), "arrival.compaction: the new arrivals"),
    ("storage.objects.get", ARRIVAL_SHARD, "arrival.compaction._checked: an arrival's shard, copied"),
    ("storage.objects.get", OLD_SHARD, "arrival.compaction._checked: a small compacted shard, rewritten"),
    ("storage.objects.create", data(ATTEMPT + "part-00000.tfrecord"), "arrival.compaction._Writer: a new shard"),
    ("storage.objects.create", data(ATTEMPT + "part-00000.json"), "arrival.compaction: the snapshot's parts"),
    ("storage.objects.create", NEXT_SNAPSHOT, "arrival.compaction: the snapshot, create-only, last"),
    ("storage.objects.delete", data(ATTEMPT + "fence"), "arrival.compaction: the fence, once the snapshot exists"),
]
RELEASES_ON_SNAPSHOT: list[Op] = [
    ("storage.objects.list", DATA_BUCKET, "core.artifacts.snapshots.listed: the dataset's snapshots"),
    ("storage.objects.get", SNAPSHOT, "core.artifacts.snapshots.with_snapshot: the newest one's fence"),
]
# The collection rule in the reconciler (landfall.reconcile.collect, landfall.arrival.compaction.collect).
FENCE = data("compacted/pump-7/00000002-0badf00d/fence")  # what a crashed attempt left
COLLECTS: list[Op] = [
    ("storage.objects.list", DATA_BUCKET, "reconcile.collect.datasets_with_snapshots: the delimiter listing"),
    ("storage.objects.get", data("requests/pump-7/head.json"), "submit.ledger.head_seq: the head job's hint"),
    ("storage.objects.get", data("runs/pump-7-3/inputs.json"), "reconcile.collect.named_by_live_jobs"),
    ("storage.objects.list", DATA_BUCKET, "core.artifacts.snapshots.listed, arrival.compaction.collect: "
     "snapshots/<D>/, compacted/<D>/"),
    ("storage.objects.get", SNAPSHOT, "arrival.compaction.collect: every snapshot listed"),
    ("storage.objects.get", OLD_PART, "core.artifacts.snapshots.read_shards: the kept snapshots' parts"),
    ("storage.objects.delete", SNAPSHOT, "arrival.compaction.collect: a collectable snapshot"),
    ("storage.objects.delete", OLD_PART, "arrival.compaction.collect: a part no kept snapshot names"),
    ("storage.objects.delete", OLD_SHARD, "arrival.compaction.collect: a shard no kept snapshot names"),
    ("storage.objects.delete", FENCE, "arrival.compaction.collect: what a crash or a lost race left"),
]
# What only the compactor writes, and what a snapshot makes immutable: nobody else may touch them.
WRITES_SNAPSHOTS = [("storage.objects.create", NEXT_SNAPSHOT), ("storage.objects.delete", SNAPSHOT),
                    ("storage.objects.create", data(ATTEMPT + "part-00000.tfrecord")),
                    ("storage.objects.delete", OLD_SHARD)]
TRAINER_TOUCHES = [data("runs/pump-7-3/checkpoint"), data("runs/pump-7-3/model/saved_model.pb"),
                   data("models/pump-7/champion.json")]
# Detections on arrival (landfall.detect, the Cloud Run service landfall-scorer): the arrival's records, the champion
# and its model read; its results under scores/<ds>/<arrival>/<champion job>/, create-only; detections published.
SCORER_SERVICE = gcp.run_service(PROJECT, REGION, SCORER)
DETECTIONS, SCORE_REQUESTS = gcp.topic(PROJECT, "detections"), gcp.topic(PROJECT, "score_requests")
CHAMPION = data("models/pump-7/champion.json")
CHAMPION_MODEL = [data("runs/pump-7-3/model/saved_model.pb"),
                  data("runs/pump-7-3/model/variables/variables.data-00000-of-00001"),
                  data("runs/pump-7-3/model/threshold.json"), data("runs/pump-7-3/model/normalization.json")]
SCORES = "scores/pump-7/a1/pump-7-3/"
SCORE_RESULTS = [data(SCORES + "scores-0a1b2c3d.parquet"), data(SCORES + "flagged-0a1b2c3d.parquet"),
                 data(SCORES + "summary.json"), data(SCORES + "published.json")]
SCORES_ARRIVAL: list[Op] = [
    ("storage.objects.get", data("tfrecords/pump-7/a1/manifest.json"), "detect.handler: the request's manifest"),
    ("storage.objects.get", data("tfrecords/pump-7/a1/retracted.json"),
     "core.artifacts.retractions: is the arrival retracted"),
    ("storage.objects.get", data("incoming/pump-7/2026-12-01.csv"), "detect.score.score_series: a series dataset's "
     "source, at the manifest's generation (as landfall score reads it)"),
    ("storage.objects.get", ARRIVAL_SHARD, "detect.score.score_instances: an instance dataset's records, the shards "
     "its manifest lists"),
    ("storage.objects.get", CHAMPION, "core.artifacts.champion.read: the dataset's champion record"),
    ("storage.objects.list", DATA_BUCKET, "core.scoring.Scorer.load: storage.sync_down lists runs/<job>/model/"),
    *[("storage.objects.get", m, "core.scoring.Scorer.load: the champion's SavedModel, threshold, normalization")
      for m in CHAMPION_MODEL],
    *[("storage.objects.get", r,
       "core.artifacts.detections.read/published: is this (arrival, champion) scored, published")
      for r in SCORE_RESULTS],
    *[("storage.objects.create", r, "core.artifacts.detections: scores, flagged, summary last, published marker; "
       "each ifGenerationMatch=0 (create only)") for r in SCORE_RESULTS],
    ("pubsub.topics.publish", DETECTIONS, "core.artifacts.detections: one landfall.detection/v1 per scored arrival"),
    # Its log lines are its container's stderr, which Cloud Run sends to Cloud Logging: no logging grant.
]

OPERATIONS: dict[str, list[Op]] = {
    "converter": [*READS_SPEC, *READS_ARRIVAL,
                  # shape.window.length auto: the first arrival's estimate, over the generation read (an overwrite
                  # also needs delete: https://cloud.google.com/storage/docs/access-control/iam-permissions).
                  *[(p, SPEC,
                     "arrival.autowindow.resolve: core.artifacts.specs.apply, conditional on the generation read")
                    for p in ("storage.objects.create", "storage.objects.delete")],
                  ("storage.objects.create", data("tfrecords/pump-7/a1/dispatch.json"), "arrival.route: marker"),
                  ("storage.objects.update", data("tfrecords/pump-7/a1/dispatch.json"), "dispatch: execution name"),
                  ("storage.objects.delete", data("tfrecords/pump-7/a1/dispatch.json"), "dispatch: run_job failed"),
                  ("run.jobs.runWithOverrides", gcp.run_job(PROJECT, REGION, JOB),
                   "arrival.cloudrun: one execution")],
    "convert-job": [*READS_SPEC, *READS_ARRIVAL, *COMPACTS,
                    ("storage.objects.create", data("tmp/pump-7/a1/ranged-3/task-0.json"), "arrival.ranged: a part"),
                    ("storage.objects.get", data("tmp/pump-7/a1/ranged-3/task-1.json"), "ranged: the commit")],
    "submitter": [*READS_SPEC, *BOOKKEEPING, *RELEASES_ON_SNAPSHOT,
                  ("storage.objects.create", data("rejected/pump-7/request-r1.json"),
                   "core.artifacts.rejections: bad request"),
                  ("container.clusters.get", CLUSTER, "submit.backends.kube: GKE endpoint credentials")],
    "reconciler": [*READS_SPEC, *BOOKKEEPING, *RELEASES_ON_SNAPSHOT, *COLLECTS,
                   ("storage.objects.get", data("runs/pump-7-3/metrics.json"), "reconcile.announce: the result body"),
                   ("storage.objects.create", data("runs/pump-7-3/result.json"), "core.artifacts.results: create-only"),
                   ("storage.objects.update", data("runs/pump-7-3/result.json"),
                    "core.artifacts.results: published_at"),
                   ("pubsub.topics.publish", RESULTS, "core.artifacts.results: the result message")],
    "trainer": [*READS_SPEC,
                ("storage.objects.list", DATA_BUCKET, "trainer.training.inputs: a dataset prefix's manifests"),
                ("storage.objects.get", ARRIVAL_SHARD, "staging shards"),
                ("storage.objects.get", data("runs/pump-7-3/inputs.json"), "trainer.training.inputs: the job's inputs"),
                ("storage.objects.get", SNAPSHOT,
                 "trainer.training.inputs._snapshot_shards: the snapshot inputs.json names"),
                ("storage.objects.get", OLD_PART, "core.artifacts.snapshots.read_shards: its parts"),
                ("storage.objects.get", OLD_SHARD, "trainer.training.inputs.stage: a compacted shard"),
                *[(p, r, "trainer: checkpoints, model, metrics") for r in TRAINER_TOUCHES[:2]
                  for p in ("storage.objects.create", "storage.objects.get", "storage.objects.delete")],
                ("storage.objects.update", data("models/pump-7/champion.json"),
                 "core.artifacts.champion: generation-guarded"),
                ("storage.objects.create", data("models/pump-7/history/4.json"), "core.artifacts.champion: history"),
                ("pubsub.topics.publish", RESULTS, "core.artifacts.results: the chief announces"),
                *[("storage.objects.get", r, "champion_view.reuse: the scorer's summary and scores of an arrival")
                  for r in (SCORE_RESULTS[0], SCORE_RESULTS[2])],
                ("storage.objects.get", LABELLED_MANIFEST,
                 "core.artifacts.labelled.read: the manifest, the commit point"),
                ("storage.objects.get", LABELLED_SET,
                 "core.artifacts.labelled.read: the set (trainer.judging.labelled_check.load)")],
    "scorer": [*READS_SPEC, *SCORES_ARRIVAL],
    "invoker": [("run.routes.invoke", s, "Pub/Sub push to the function") for s in services()],
    "scorer-invoker": [("run.routes.invoke", SCORER_SERVICE, "Pub/Sub push to the scorer (both subscriptions)")],
    PUBSUB_AGENT: [("iam.serviceAccounts.getOpenIdToken", gcp.service_account(PROJECT, "invoker"),
                    "push: an OIDC token of the invoker"),
                   ("iam.serviceAccounts.getOpenIdToken", gcp.service_account(PROJECT, "scorer-invoker"),
                    "push to the scorer: an OIDC token of its push identity"),
                   *[("pubsub.subscriptions.consume", gcp.subscription(PROJECT, s), "dead-lettering acks")
                     for s in ("training_requests", "arrivals", "scorer_arrivals", "scorer_rescore")]],
    "gke-nodes": [("logging.logEntries.create", LOGS, "node logs"),
                  ("artifactregistry.repositories.downloadArtifacts", gcp.repository(PROJECT, REGION, "trainer"),
                   "pull the trainer image")],
    "fn-build": [("logging.logEntries.create", LOGS, "build logs"),
                 ("storage.objects.get", gcp.obj(GCF_STAGING, "on-data-arrival/source.zip"), "Cloud Functions' copy"),
                 ("storage.objects.get", gcp.obj(SOURCES, "functions/functions-abc.zip"), "the uploaded archive"),
                 ("artifactregistry.repositories.uploadArtifacts", gcp.repository(PROJECT, REGION, "functions"),
                  "push the function image")],
    "test": [("logging.logEntries.create", LOGS, "build logs")],
    "build": [
        ("logging.logEntries.create", LOGS, "build logs"),
        ("artifactregistry.repositories.uploadArtifacts", gcp.repository(PROJECT, REGION, "trainer"),
         "cloudbuild-deploy.yaml: docker push trainer and converter"),
        *[(p, gcp.obj(STATE, "landfall/prod/functions/default.tfstate"), "terraform state")
          for p in ("storage.objects.get", "storage.objects.create", "storage.objects.update")],
        ("storage.objects.list", gcp.bucket(STATE), "terraform state: the backend lists workspaces"),
        ("storage.objects.create", gcp.obj(SOURCES, "functions/functions-abc.zip"), "the function archive"),
        *[(p, gcp.function(PROJECT, REGION, f), "terraform apply: the function")
          for f in FUNCTIONS for p in ("cloudfunctions.functions.get", "cloudfunctions.functions.update",
                                       "cloudfunctions.functions.sourceCodeSet",
                                       "cloudfunctions.functions.getIamPolicy")],
        ("cloudfunctions.operations.get", gcp.operation("cloudfunctions.googleapis.com", PROJECT, REGION),
         "terraform polls the update"),
        *[(p, s, "terraform: the invoker's binding on the function's service")
          for s in services() for p in ("run.services.getIamPolicy", "run.services.setIamPolicy")],
        *[(p, gcp.run_job(PROJECT, REGION, JOB), "terraform apply: the convert job")
          for p in ("run.jobs.get", "run.jobs.update", "run.jobs.getIamPolicy", "run.jobs.setIamPolicy")],
        ("run.operations.get", gcp.operation("run.googleapis.com", PROJECT, REGION), "terraform polls the job update"),
        *[(p, gcp.subscription(PROJECT, s), "terraform apply: the push subscription")
          for s in ("training_requests", "arrivals", "scorer_arrivals", "scorer_rescore")
          for p in ("pubsub.subscriptions.get", "pubsub.subscriptions.update", "pubsub.subscriptions.getIamPolicy",
                    "pubsub.subscriptions.setIamPolicy")],
        *[(p, SCORER_SERVICE, "terraform apply: the scorer service (a new image) and its invoker binding")
          for p in ("run.services.get", "run.services.update", "run.services.getIamPolicy",
                    "run.services.setIamPolicy")],
        ("run.operations.get", gcp.operation("run.googleapis.com", PROJECT, REGION), "terraform polls the service"),
        *[("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, a), "the accounts the functions root names")
          for a in ("converter", "submitter", "invoker", "fn-build", "convert-job", "scorer", "scorer-invoker")],
        ("container.clusters.get", CLUSTER, "kubectl apply -k: cluster credentials"),
        # cloudbuild-deploy.yaml apply-datasets: read the generation, write over it (an overwrite also needs delete:
        # https://cloud.google.com/storage/docs/access-control/iam-permissions, read 2026-12-01).
        *[(p, SPEC, "landfall datasets apply: conditional on the generation read")
          for p in ("storage.objects.get", "storage.objects.create", "storage.objects.update",
                    "storage.objects.delete")],
        ("storage.objects.get", LABELLED_MANIFEST, "core.artifacts.labelled.write: is the set committed already"),
        ("storage.objects.create", LABELLED_SET, "core.artifacts.labelled.write: the set, create-only"),
        ("storage.objects.create", LABELLED_MANIFEST, "core.artifacts.labelled.write: its manifest, create-only, last"),
    ],
}

# The vertex engine (infra/modules/iam, "the vertex engine"): no cluster; the releasers create CustomJobs that run as
# the trainer account, and Cloud Scheduler starts the reconcile job in the reconciler Deployment's place.
CUSTOM_JOBS = gcp.project_level("aiplatform.googleapis.com", PROJECT, "CustomJob")  # no IAM policy of their own
RECONCILE = gcp.run_job(PROJECT, REGION, RECONCILE_JOB)
CLAIM = data("runs/pump-7-3/customjob.json")
RELEASES_CUSTOM_JOBS: list[Op] = [
    ("aiplatform.customJobs.list", CUSTOM_JOBS, "submit.backends.customjobs._find: by label and display name"),
    ("aiplatform.customJobs.get", CUSTOM_JOBS, "submit.backends.aiplatform.VertexJobs.get"),
    ("aiplatform.customJobs.create", CUSTOM_JOBS, "submit.backends.customjobs.create"),
    ("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "trainer"), "the CustomJob's serviceAccount"),
    *[(p, CLAIM, "submit.backends.customjobs._claim: create-only, read, taken over on its generation")
      for p in ("storage.objects.create", "storage.objects.get", "storage.objects.delete")],
]
VERTEX_OPERATIONS: dict[str, list[Op]] = {
    "submitter": RELEASES_CUSTOM_JOBS,
    "reconciler": RELEASES_CUSTOM_JOBS,
    "scheduler": [("run.jobs.run", RECONCILE, "infra/modules/schedule: the reconcile job, every minute")],
    "build": [*[(p, RECONCILE, "terraform apply: the reconcile job (a new image)")
                for p in ("run.jobs.get", "run.jobs.update", "run.jobs.getIamPolicy", "run.jobs.setIamPolicy")],
              ("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "reconciler"), "the reconcile job's account")],
}
CLUSTER_ONLY = {("container.clusters.get", CLUSTER), ("logging.logEntries.create", LOGS)}  # the latter: gke-nodes'


def operations(engine: str) -> dict[str, list[Op]]:
    """What each workload does with ``engine``: the cluster's credentials and the nodes only with a cluster; the
    custom jobs, the claim and the schedule only with vertex."""
    if engine != "vertex":
        return OPERATIONS
    out = {m: [op for op in ops if (op[0], op[1]) != ("container.clusters.get", CLUSTER)]
           for m, ops in OPERATIONS.items() if m != "gke-nodes"}
    for member, ops in VERTEX_OPERATIONS.items():
        out[member] = [*out.get(member, []), *ops]
    return out


def forbidden(engine: str) -> dict[str, list[tuple[str, Resource]]]:
    """What no workload may do with ``engine``: with a cluster nothing of Vertex AI, with vertex no cluster."""
    out = {m: list(ops) for m, ops in FORBIDDEN.items()}
    if engine == "vertex":
        out["build"].remove(("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "reconciler")))
        for member in ("submitter", "reconciler", "build"):
            out.setdefault(member, []).append(("container.clusters.get", CLUSTER))
        for member in ("submitter", "reconciler"):
            out[member] += [("aiplatform.customJobs.cancel", CUSTOM_JOBS),
                            ("aiplatform.customJobs.delete", CUSTOM_JOBS), ("aiplatform.models.upload", CUSTOM_JOBS),
                            ("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "scorer")),
                            ("run.jobs.run", RECONCILE)]
        out["scheduler"] = [("run.jobs.run", gcp.run_job(PROJECT, REGION, JOB)),
                            ("run.jobs.runWithOverrides", RECONCILE), ("run.jobs.update", RECONCILE),
                            ("storage.objects.get", CLAIM), ("aiplatform.customJobs.create", CUSTOM_JOBS)]
        out["converter"] += [("aiplatform.customJobs.create", CUSTOM_JOBS), ("run.jobs.run", RECONCILE)]
        out["trainer"] += [("aiplatform.customJobs.create", CUSTOM_JOBS)]  # it writes runs/<job>/, the claim's folder
    else:
        for member in ("submitter", "reconciler", "build", "trainer"):
            out.setdefault(member, []).extend([
                ("aiplatform.customJobs.create", CUSTOM_JOBS), ("aiplatform.customJobs.list", CUSTOM_JOBS),
                ("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "trainer"))])
        for member in ("submitter", "reconciler"):
            out[member].append(("storage.objects.create", CLAIM))
        out["scheduler"] = [("run.jobs.run", RECONCILE), ("run.jobs.run", gcp.run_job(PROJECT, REGION, JOB))]
    return out


OTHER_SERVICE = gcp.run_service(PROJECT, REGION, "someone-elses-service")
FORBIDDEN: dict[str, list[tuple[str, Resource]]] = {
    "converter": [("storage.objects.create", data("config/labelled/pump-7/x.npz")),
                  ("storage.objects.get", LABELLED_SET),
                  ("storage.objects.create", data("incoming/pump-7/x.csv")),
                  ("storage.objects.get",
                  data("runs/pump-7-3/inputs.json")), ("pubsub.topics.publish", RESULTS),
                  ("run.jobs.update", gcp.run_job(PROJECT, REGION, JOB)), ("run.routes.invoke", services()[1]),
                  *WRITES_SNAPSHOTS, ("storage.objects.get", SNAPSHOT)],
    # A snapshot is create-only even for its writer: it may neither replace nor delete one.
    "convert-job": [("run.jobs.runWithOverrides", gcp.run_job(PROJECT, REGION, JOB)),
                    ("storage.objects.create", SPEC), ("storage.objects.delete", SPEC),  # the function estimates
                    ("storage.objects.delete", data("incoming/pump-7/x.csv")),
                    ("storage.objects.delete", SNAPSHOT), ("storage.objects.update", SNAPSHOT)],
    "submitter": [("storage.objects.create", data("runs/pump-7-3/metrics.json")),  # read only (the GPU budget)
                  ("storage.objects.get", LABELLED_SET),
                  ("storage.objects.get", data("runs/pump-7-3/model/saved_model.pb")),
                  ("storage.objects.create", data("runs/pump-7-3/result.json")), ("pubsub.topics.publish", RESULTS),
                  *[("storage.objects.create", r) for r in TRAINER_TOUCHES],
                  ("storage.objects.get", data("incoming/pump-7/x.csv")), *WRITES_SNAPSHOTS,
                  ("storage.objects.get", OLD_PART)],  # the release reads no part
    # It collects (deletes) under snapshots/ and compacted/, and writes nothing there: creating a snapshot, or
    # overwriting one (create and delete), or a part or a shard, is denied; it reads no compacted shard.
    "reconciler": [("storage.objects.create", data("rejected/pump-7/request-r1.json")),
                   ("container.clusters.get", CLUSTER), *[("storage.objects.create", r) for r in TRAINER_TOUCHES],
                   ("storage.objects.create", NEXT_SNAPSHOT), ("storage.objects.create", SNAPSHOT),
                   ("storage.objects.update", SNAPSHOT), ("storage.objects.create", data(ATTEMPT + "part-00000.json")),
                   ("storage.objects.create", data(ATTEMPT + "part-00000.tfrecord")),
                   ("storage.objects.get", OLD_SHARD), ("storage.objects.create", ARRIVAL_SHARD),
                   ("storage.objects.create", data("tfrecords/pump-7/a1/manifest.json")),
                   ("storage.objects.delete", ARRIVAL_SHARD), ("storage.objects.delete", data("incoming/pump-7/x.csv")),
                   ("storage.objects.delete", data("runs/pump-7-3/model/saved_model.pb")),
                   ("storage.objects.create", SPEC), ("storage.objects.delete", SPEC)],
    "trainer": [*[(p, r) for r in SCORE_RESULTS for p in ("storage.objects.create", "storage.objects.delete")],
                ("storage.objects.create", SPEC), ("storage.objects.update", SPEC),
                ("storage.objects.create", LABELLED_SET), ("storage.objects.delete", LABELLED_SET),
                ("storage.objects.create", data("tfrecords/pump-7/a1/manifest.json")),
                ("storage.objects.get", data("incoming/pump-7/x.csv")),
                ("storage.objects.delete", data("requests/pump-7/pending/r1.json")),
                ("pubsub.topics.publish", REQUESTS), *WRITES_SNAPSHOTS],
    # Reads what it scores with; writes only its own results, create-only; publishes detections only.
    "scorer": [*[(p, r) for r in (data("incoming/pump-7/x.csv"), data("tfrecords/pump-7/a1/manifest.json"),
                                  data("tfrecords/pump-7/a1/retracted.json"), ARRIVAL_SHARD, CHAMPION,
                                  data("models/pump-7/history/4.json"), *CHAMPION_MODEL,
                                  data("runs/pump-7-3/metrics.json"), SPEC)
                 for p in ("storage.objects.create", "storage.objects.update", "storage.objects.delete")],
               *[(p, r) for r in SCORE_RESULTS for p in ("storage.objects.update", "storage.objects.delete")],
               ("storage.objects.get", data("models/pump-7/history/4.json")),
               ("storage.objects.get", data("requests/pump-7/pending/r1.json")), ("storage.objects.get", SNAPSHOT),
               ("storage.objects.get", LABELLED_SET), *WRITES_SNAPSHOTS,
               ("pubsub.topics.publish", REQUESTS), ("pubsub.topics.publish", RESULTS),
               ("pubsub.topics.publish", SCORE_REQUESTS), ("container.clusters.get", CLUSTER),
               ("run.routes.invoke", SCORER_SERVICE), ("run.jobs.runWithOverrides", gcp.run_job(PROJECT, REGION, JOB)),
               ("logging.logEntries.create", LOGS)],
    "scorer-invoker": [*[("run.routes.invoke", s) for s in services()], ("run.routes.invoke", OTHER_SERVICE),
                       ("run.jobs.run", gcp.run_job(PROJECT, REGION, JOB)), ("storage.objects.get", CHAMPION)],
    "invoker": [("run.routes.invoke", OTHER_SERVICE), ("run.routes.invoke", SCORER_SERVICE),
                ("run.jobs.run", gcp.run_job(PROJECT, REGION, JOB)),
                ("storage.objects.get", SNAPSHOT), *WRITES_SNAPSHOTS],
    "gke-nodes": [("artifactregistry.repositories.uploadArtifacts", gcp.repository(PROJECT, REGION, "trainer"))],
    "fn-build": [("artifactregistry.repositories.uploadArtifacts", gcp.repository(PROJECT, REGION, "trainer")),
                 ("storage.objects.get", data("incoming/pump-7/x.csv")), ("storage.objects.get", SNAPSHOT)],
    "test": [("artifactregistry.repositories.uploadArtifacts", gcp.repository(PROJECT, REGION, "trainer")),
             ("storage.objects.get", gcp.obj(STATE, "landfall/prod/functions/default.tfstate"))],
    "build": [("cloudfunctions.functions.create", gcp.function(PROJECT, REGION, "another-function")),
              ("cloudfunctions.functions.update", gcp.function(PROJECT, REGION, "another-function")),
              ("cloudfunctions.functions.delete", gcp.function(PROJECT, REGION, FUNCTIONS[0])),
              ("cloudfunctions.functions.setIamPolicy", gcp.function(PROJECT, REGION, FUNCTIONS[0])),
              ("run.routes.invoke", services()[0]), ("run.services.setIamPolicy", OTHER_SERVICE),
              ("run.routes.invoke", SCORER_SERVICE), ("run.services.delete", SCORER_SERVICE),
              ("run.services.update", OTHER_SERVICE), ("run.services.update", services()[0]),
              ("pubsub.subscriptions.consume", gcp.subscription(PROJECT, "scorer_arrivals")),
              ("pubsub.topics.publish", DETECTIONS), ("storage.objects.get", SCORE_RESULTS[0]),
              ("run.jobs.run", gcp.run_job(PROJECT, REGION, JOB)),
              ("run.jobs.update", gcp.run_job(PROJECT, REGION, "another-job")),
              ("pubsub.subscriptions.update", gcp.subscription(PROJECT, "another-subscription")),
              ("pubsub.subscriptions.consume", gcp.subscription(PROJECT, "training_requests")),
              ("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "reconciler")),
              ("iam.serviceAccounts.actAs", gcp.service_account(PROJECT, "trainer")),
              ("storage.objects.get", data("tfrecords/pump-7/a1/manifest.json")),
              ("storage.objects.get", SNAPSHOT), ("storage.objects.get", OLD_SHARD), *WRITES_SNAPSHOTS,
              ("storage.objects.create", data("config/other/pump-7.json")), ("storage.objects.list", DATA_BUCKET),
              # a labelled set is create-only, even for the build that writes it
              ("storage.objects.update", LABELLED_SET), ("storage.objects.delete", LABELLED_SET),
              ("storage.objects.delete", LABELLED_MANIFEST)],
}


def policy(root: Path = INFRA, engine: str = "jobset") -> Policy:
    p = Policy(grants(root, engine))
    p.roles = {**p.roles, **custom_roles(root)}
    return p


def denied_operations(p: Policy, engine: str = "jobset") -> list[str]:
    return [f"{member}: {perm} on {res.name} ({why})" for member, ops in operations(engine).items()
            for perm, res, why in ops if not p.allows(member, perm, res)]


def allowed_forbidden(p: Policy, engine: str = "jobset") -> list[str]:
    return [f"{member}: {perm} on {res.name} via {[g.where for g in p.allows(member, perm, res)]}"
            for member, ops in forbidden(engine).items() for perm, res in ops if p.allows(member, perm, res)]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_operation_of_every_workload_is_allowed(engine: str) -> None:
    assert denied_operations(policy(engine=engine), engine) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_what_no_workload_may_do_is_denied(engine: str) -> None:
    assert allowed_forbidden(policy(engine=engine), engine) == []


def test_operations_name_the_resource_the_platform_checks() -> None:
    """A listing is checked on the bucket, an object permission on an object (Cloud Storage's JSON API)."""
    for member, ops in OPERATIONS.items():
        for perm, res, _why in ops:
            if perm in gcp.STORAGE_CHECKED_ON.value:
                assert res.type == gcp.STORAGE_CHECKED_ON.value[perm], (member, perm, res.name)


def test_no_condition_reads_an_attribute_its_service_ignores() -> None:
    """A conditioned grant whose role's permissions belong to a service that does not recognize resource attributes
    would grant nothing: not one such grant."""
    p = policy()
    for g in p.grants:
        if g.condition is None or "resource." not in g.condition:
            continue
        services = {perm.split(".")[0] + ".googleapis.com" for perm in p.roles[g.role]} - {
            "resourcemanager.googleapis.com", "orgpolicy.googleapis.com"}  # carried by every storage role
        assert services <= gcp.RESOURCE_ATTRIBUTE_SERVICES.value, f"{g.where}: {services}"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_workload_account_is_exercised(engine: str) -> None:
    members = {g.member for g in policy(engine=engine).grants if not g.member.startswith("serviceAccount:")}
    assert members == set(operations(engine)), members ^ set(operations(engine))


# --- the evaluator applies the published rules --------------------------------------------------------------------
def test_conditions_on_services_without_resource_attributes_never_grant() -> None:
    svc = services()[0]
    assert gcp.evaluate(f'resource.name == "{svc.name}"', svc) is gcp.UNKNOWN
    assert gcp.evaluate(f'!(resource.name == "{svc.name}")', svc) is gcp.UNKNOWN
    assert gcp.evaluate(f'resource.name == "{svc.name}" || true', svc) is True
    p = Policy([Grant("t", "x", "roles/run.invoker", "project", f'resource.name == "{svc.name}"')])
    assert not p.allows("x", "run.routes.invoke", svc)
    assert Policy([Grant("t", "x", "roles/run.invoker", "project")]).allows("x", "run.routes.invoke", svc)


def test_storage_listing_is_checked_on_the_bucket() -> None:
    only_objects = f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/tfrecords/")'
    p = Policy([Grant("t", "x", "roles/storage.objectViewer", f"bucket:{BUCKET}", only_objects)])
    assert p.allows("x", "storage.objects.get", data("tfrecords/a/manifest.json"))
    assert not p.allows("x", "storage.objects.list", DATA_BUCKET)
    assert gcp.evaluate(only_objects, DATA_BUCKET) is False  # storage supplies the name: it just does not match
    assert not p.allows("x", "storage.objects.get", gcp.obj("other-bucket", "tfrecords/a"))  # another bucket's policy


def test_the_rules_carry_their_sources() -> None:
    for rule in (gcp.RESOURCE_ATTRIBUTE_SERVICES, gcp.UNAVAILABLE_NEVER_GRANTS, gcp.STORAGE_NAMES,
                 gcp.STORAGE_CHECKED_ON, gcp.POLICY_INHERITANCE, gcp.OPERATIONS_ON_PROJECT):
        assert rule.source.startswith("https://cloud.google.com/") and rule.read == gcp.READ
    for absent in ("run.googleapis.com", "cloudfunctions.googleapis.com", "pubsub.googleapis.com"):
        assert absent not in gcp.RESOURCE_ATTRIBUTE_SERVICES.value
    roles = gcp.predefined_roles()
    used = {g.role for g in policy().grants if g.role.startswith("roles/")}
    assert used <= set(roles), used - set(roles)


# --- the grants this replaced fail the check ------------------------------------------------------------------------
OLD = {
    "invoker_run_invoker": ("infra/modules/iam/main.tf", ["google_cloud_run_v2_service_iam_member.invoker"], '''
resource "google_project_iam_member" "invoker_run_invoker" {
  project = var.project_id
  role    = "roles/run.invoker"
  member  = google_service_account.sa["invoker"].member
  condition {
    title = "landfall-functions-only"
    expression = join(" || ", [
      for f in var.function_names :
      "resource.name == \\"projects/${var.project_id}/locations/${var.region}/services/${f}\\""
    ])
  }
}
'''),
    "build_functions": ("infra/modules/iam/main.tf", [
        "google_cloudfunctions2_function_iam_member.build_deploys_function",
        "google_project_iam_member.build_operations"], '''
resource "google_project_iam_member" "build_functions" {
  project = var.project_id
  role    = "roles/cloudfunctions.developer"
  member  = google_service_account.sa["build"].member
  condition {
    title = "landfall-functions-only"
    expression = join(" || ", concat([
      for f in var.function_names :
      "resource.name == \\"projects/${var.project_id}/locations/${var.region}/functions/${f}\\""
      ], [
      "resource.name.startsWith(\\"projects/${var.project_id}/locations/${var.region}/operations/\\")",
    ]))
  }
}
'''),
    "build_convert_job": ("infra/modules/iam/main.tf", ["google_cloud_run_v2_job_iam_member.build_deploys_convert_job",
                                                        "google_project_iam_member.build_operations"], '''
resource "google_project_iam_member" "build_convert_job" {
  project = var.project_id
  role    = google_project_iam_custom_role.job_deployer.name
  member  = google_service_account.sa["build"].member
  condition {
    title = "landfall-convert-job-only"
    expression = join(" || ", [
      "resource.name == \\"projects/${var.project_id}/locations/${var.region}/jobs/${var.convert_job_name}\\"",
      "resource.name.startsWith(\\"projects/${var.project_id}/locations/${var.region}/operations/\\")",
    ])
  }
}
'''),
}


def remove_block(text: str, address: str) -> str:
    kind, name = address.split(".")
    pattern = re.compile(rf'^resource "{kind}" "{name}" \{{\n.*?^\}}\n', re.S | re.M)
    assert pattern.search(text), address
    return pattern.sub("", text)


@pytest.mark.parametrize("old", sorted(OLD))
def test_each_replaced_grant_fails_the_check_when_put_back(old: str, tmp_path: Path) -> None:
    target, replaced_by, block = OLD[old]
    infra = tmp_path / "infra"
    shutil.copytree(INFRA, infra)
    for tf in infra.rglob("*.tf"):
        text = tf.read_text()
        for address in replaced_by:
            if f'resource "{address.split(".")[0]}" "{address.split(".")[1]}"' in text:
                text = remove_block(text, address)
        tf.write_text(text)
    (infra / target.removeprefix("infra/")).write_text((infra / target.removeprefix("infra/")).read_text() + block)
    p = policy(infra)
    assert any(g.where.endswith(old) for g in p.grants)  # the old grant is read back in
    assert denied_operations(p), f"{old} put back, yet every operation is still allowed"


def test_snapshots_and_compacted_shards_reach_exactly_their_workloads() -> None:
    """Every principal any grant names, on snapshots/ and compacted/: the releasers read the snapshot's top
    object, the trainer reads all three kinds, the convert job alone writes, and it cannot replace or delete a
    snapshot (create-only); the reconciler, which collects, reads parts and deletes, and creates nothing; nobody
    else holds anything there."""
    p = policy()
    perms = ("storage.objects.get", "storage.objects.create", "storage.objects.delete", "storage.objects.update")
    objects = {"snapshot": SNAPSHOT, "part": OLD_PART, "shard": OLD_SHARD}
    held = {m: {(kind, perm.removeprefix("storage.objects.")) for kind, res in objects.items() for perm in perms
                if p.allows(m, perm, res)} for m in {g.member for g in p.grants}}
    rw = {(k, op) for k in ("part", "shard") for op in ("get", "create", "delete", "update")}
    assert {m: h for m, h in held.items() if h} == {
        "convert-job": {("snapshot", "get"), ("snapshot", "create"), *rw},
        "submitter": {("snapshot", "get")},
        "reconciler": {("snapshot", "get"), ("snapshot", "delete"), ("part", "get"), ("part", "delete"),
                       ("shard", "delete")},
        "trainer": {(k, "get") for k in objects},
    }


def test_compaction_is_on_for_the_deployed_function_and_its_job_may_compact() -> None:
    """The function starts compaction executions (LANDFALL_COMPACT_EVERY > 0) and the job they run as may do all
    that compaction does: one without the other would fail every compaction (AccessDenied, retried, no snapshot)."""
    text = (INFRA / "modules" / "functions" / "main.tf").read_text()
    every = re.findall(r'^\s+LANDFALL_COMPACT_EVERY\s+=\s+"(\d+)"', text, re.M)
    assert every and int(every[0]) > 0, every
    p = policy()
    assert [op for op in COMPACTS if not p.allows("convert-job", op[0], op[1])] == []
