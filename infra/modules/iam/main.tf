# One service account per workload, each holding only what its work needs.
# No keys are created anywhere: functions run as their account, pods use
# Workload Identity, Cloud Build runs as its account.

locals {
  objects = "projects/_/buckets/${var.bucket_name}/objects"
  # Object-level grants limited to a prefix. Listing is checked against the bucket
  # itself, so the viewer conditions also admit the bucket resource (names only).
  prefix_condition = {
    for p in ["incoming", "tfrecords", "runs", "rejected", "tmp", "requests", "received", "models", "compacted", "snapshots", "config/datasets", "config/labelled", "scores"] :
    p => "resource.name.startsWith(\"${local.objects}/${p}/\")"
  }
  list_condition = "resource.type == \"storage.googleapis.com/Bucket\""
  # The engine decides where jobs run: on the cluster (tfjob, jobset: Workload Identity, clusterViewer) or as Vertex
  # AI custom jobs (vertex: no cluster; the releasers create CustomJobs that run as the trainer account).
  vertex = var.engine == "vertex"

  accounts = {
    converter = "Landfall converter (on-data-arrival): incoming/ -> tfrecords/, publishes training requests"
    # account_id landfall-convert-job (30 characters at most)
    convert-job = "Landfall convert job (Cloud Run job tasks): large arrivals, incoming/ -> tfrecords/"
    submitter   = "Landfall submitter (on-training-request): reads manifests, creates TFJobs"
    reconciler  = "Landfall reconciler (Deployment via Workload Identity): releases follow-ups, announces results"
    trainer     = "Landfall trainer (TFJob pods via Workload Identity): tfrecords/ -> runs/"
    invoker     = "Landfall invoker: Pub/Sub push identity that calls the functions"
    gke-nodes   = "Landfall GKE nodes: logs, metrics, image pulls"
    test        = "Landfall tests (Cloud Build test trigger): writes logs, holds no deploy rights"
    build       = "Landfall deploy (Cloud Build deploy trigger): pushes the image, deploys functions and manifests"
    fn-build    = "Landfall function builds: builds the functions' containers"
    scorer      = "Landfall scorer (Cloud Run service landfall-scorer): scores arrivals with the champion, writes scores/, publishes detections"
    # account_id landfall-scorer-invoker (30 characters at most)
    scorer-invoker = "Landfall scorer invoker: Pub/Sub push identity that calls the scorer service only"
    # Holds a grant only with the vertex engine (the reconcile job's run grant, in infra/modules/functions).
    scheduler = "Landfall reconcile schedule (Cloud Scheduler, vertex engine): starts the reconcile job each minute"
  }
}

data "google_project" "this" {
  project_id = var.project_id
}

resource "google_service_account" "sa" {
  for_each     = local.accounts
  project      = var.project_id
  account_id   = "landfall-${each.key}"
  display_name = each.value
}

# --- converter --------------------------------------------------------------

resource "google_storage_bucket_iam_member" "converter_read_incoming" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["converter"].member
  condition {
    title      = "incoming-only"
    expression = "${local.prefix_condition["incoming"]} || ${local.list_condition}"
  }
}

resource "google_storage_bucket_iam_member" "converter_write" {
  # tmp/: attempt-private shards, moved to tfrecords/ once their count is known.
  for_each = toset(["tfrecords", "rejected", "tmp"])
  bucket   = var.bucket_name
  # objectUser, not objectCreator: retried events rewrite the same object names.
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["converter"].member
  condition {
    title      = "${each.key}-only"
    expression = local.prefix_condition[each.key]
  }
}

resource "google_pubsub_topic_iam_member" "converter_publish" {
  project = var.project_id
  topic   = var.topic_name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.sa["converter"].member
}

# --- convert job (Cloud Run job landfall-convert) ------------------------------
# Large arrivals are converted by the tasks of the Cloud Run job (infra/modules/functions,
# landfall.arrival.ranged) running as this account: the converter function's object rights,
# mirrored (read incoming/; write tfrecords/, tmp/ and rejected/) and publish on the
# training-request topic (the committing task publishes the request). Nothing else.

resource "google_storage_bucket_iam_member" "convert_job_read_incoming" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["convert-job"].member
  condition {
    title      = "incoming-only"
    expression = "${local.prefix_condition["incoming"]} || ${local.list_condition}"
  }
}

resource "google_storage_bucket_iam_member" "convert_job_write" {
  # Tasks rewrite their own deterministic parts on a retry: objectUser.
  for_each = toset(["tfrecords", "rejected", "tmp"])
  bucket   = var.bucket_name
  role     = "roles/storage.objectUser"
  member   = google_service_account.sa["convert-job"].member
  condition {
    title      = "${each.key}-only"
    expression = local.prefix_condition[each.key]
  }
}

# Compaction (landfall.arrival.compaction, run by this job when the converter function starts an execution
# with LANDFALL_COMPACT_DATASET): it reads the newest snapshot and its parts, the dataset's manifests and
# shards (tfrecords/, above), and writes under its attempt's own folder compacted/<D>/<seq>-<token>/ the
# fence (deleted once the snapshot exists), the shards and the parts; it reads back what the previous
# snapshot names there to rewrite it. objectUser there: create, read and delete the fence.
resource "google_storage_bucket_iam_member" "convert_job_compacted" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["convert-job"].member
  condition {
    title      = "compacted-only"
    expression = local.prefix_condition["compacted"]
  }
}

# snapshots/<D>/<seq>.json: read (the newest is where a compaction starts) and created last, create-only.
# objectCreator cannot replace or delete an object, so not even a bug in the compactor can overwrite a
# snapshot a job reads (a compactor that lost the race for a seq gets 412, or 403, temporary: its task is
# retried from the winner's snapshot); the collection rule's deletes run in the reconciler (below), not here.
resource "google_storage_bucket_iam_member" "convert_job_read_snapshots" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["convert-job"].member
  condition {
    title      = "snapshots-only"
    expression = local.prefix_condition["snapshots"]
  }
}

resource "google_storage_bucket_iam_member" "convert_job_create_snapshots" {
  bucket = var.bucket_name
  role   = "roles/storage.objectCreator"
  member = google_service_account.sa["convert-job"].member
  condition {
    title      = "snapshots-only"
    expression = local.prefix_condition["snapshots"]
  }
}

resource "google_pubsub_topic_iam_member" "convert_job_publish" {
  project = var.project_id
  topic   = var.topic_name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.sa["convert-job"].member
}

# Starting the job is granted on the job itself (google_cloud_run_v2_job_iam_member in
# infra/modules/functions, next to the job): the converter account may run that job with
# overrides, nothing else in Cloud Run.

# --- submitter --------------------------------------------------------------

# Releasing lists the dataset's manifests (and retraction records) under tfrecords/ and reads the newest
# snapshot's top object under snapshots/ (landfall.core.artifacts.snapshots.with_snapshot); it reads no part.
resource "google_storage_bucket_iam_member" "submitter_read_manifests" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["submitter"].member
  condition {
    title      = "tfrecords-and-snapshots"
    expression = "${local.prefix_condition["tfrecords"]} || ${local.prefix_condition["snapshots"]} || ${local.list_condition}"
  }
}

# Rejected requests are recorded under rejected/ (rewritten on redelivery: objectUser).
resource "google_storage_bucket_iam_member" "submitter_write_rejections" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["submitter"].member
  condition {
    title      = "rejected-only"
    expression = local.prefix_condition["rejected"]
  }
}

# The submit stage's bookkeeping (landfall.submit.ledger): requests waiting for their
# dataset's next job under requests/ (written, read, deleted once covered), each request's
# create-only record under received/ (how a late redelivery is recognised), and each
# released job's runs/<job>/inputs.json and submitted.json (created once, read). Nothing
# else under runs/ is written: the trainer's metrics and models, and the reconciler's
# result.json, stay out of its reach (metrics.json is read only: below).
resource "google_storage_bucket_iam_member" "submitter_bookkeeping" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["submitter"].member
  condition {
    title      = "requests-and-job-inputs"
    expression = "${local.prefix_condition["requests"]} || ${local.prefix_condition["received"]} || (${local.prefix_condition["runs"]} && (resource.name.endsWith(\"/inputs.json\") || resource.name.endsWith(\"/submitted.json\")))"
  }
}

# The retrain policy's GPU budget (landfall.submit.policy, landfall.submit.spend) counts each
# ended job's gpu_seconds, which its chief records in runs/<job>/metrics.json: read only,
# nothing else the trainer writes.
resource "google_storage_bucket_iam_member" "submitter_read_job_metrics" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["submitter"].member
  condition {
    title      = "job-metrics-only"
    expression = "${local.prefix_condition["runs"]} && resource.name.endsWith(\"/metrics.json\")"
  }
}

# Reaching the cluster's API needs container.clusters.get to authenticate; that is
# all IAM grants (clusterViewer: read cluster metadata, no Kubernetes objects). The
# Role/RoleBinding in k8s/base (create/get/list tfjobs in
# landfall-training, bound to this account's email) does the rest. Project-wide
# container.developer would let it write any object in any namespace, so it is not used.
resource "google_project_iam_member" "submitter_cluster_access" {
  count   = local.vertex ? 0 : 1
  project = var.project_id
  role    = "roles/container.clusterViewer"
  member  = google_service_account.sa["submitter"].member
}

# --- reconciler ---------------------------------------------------------------
# The landfall-reconciler Deployment (k8s/base/reconciler.yaml). It releases follow-up jobs
# with the submit stage's code (landfall.submit.coalesce), so it holds the submitter's
# bucket rights except rejected/ (it rejects nothing), it announces jobs that ended
# without a chief (landfall.reconcile.announce), and it applies the snapshots' collection
# rule (landfall.reconcile.collect: read parts, delete). It reaches the Kubernetes API with its
# in-cluster ServiceAccount token (RBAC in k8s/base/rbac.yaml), so no clusterViewer.

resource "google_service_account_iam_member" "reconciler_workload_identity" {
  count              = local.vertex ? 0 : 1
  service_account_id = google_service_account.sa["reconciler"].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.workload_pool}[${var.training_namespace}/${var.reconciler_ksa}]"
}

# Releasing lists the dataset's manifests (and retraction records) under tfrecords/ and reads the newest
# snapshot under snapshots/, as the submitter does.
resource "google_storage_bucket_iam_member" "reconciler_read_manifests" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["reconciler"].member
  condition {
    title      = "tfrecords-and-snapshots"
    expression = "${local.prefix_condition["tfrecords"]} || ${local.prefix_condition["snapshots"]} || ${local.list_condition}"
  }
}

# The submitter's bookkeeping (above), plus runs/<job>/result.json: announcing creates it
# create-only before publishing and completes it after (landfall.core.artifacts.results).
resource "google_storage_bucket_iam_member" "reconciler_bookkeeping" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["reconciler"].member
  condition {
    title      = "requests-job-inputs-and-results"
    expression = "${local.prefix_condition["requests"]} || ${local.prefix_condition["received"]} || (${local.prefix_condition["runs"]} && (resource.name.endsWith(\"/inputs.json\") || resource.name.endsWith(\"/submitted.json\") || resource.name.endsWith(\"/result.json\")))"
  }
}

# An announced result is built from runs/<job>/metrics.json: read only, nothing else the
# trainer writes.
resource "google_storage_bucket_iam_member" "reconciler_read_job_metrics" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["reconciler"].member
  condition {
    title      = "job-metrics-only"
    expression = "${local.prefix_condition["runs"]} && resource.name.endsWith(\"/metrics.json\")"
  }
}

# The collection rule (landfall.reconcile.collect, at most once an hour): for each dataset under snapshots/
# it reads the snapshots (above) and the parts of those it keeps, lists compacted/<D>/ (a listing, checked on
# the bucket: above), and deletes the superseded snapshots and the objects under compacted/ that no kept
# snapshot names. It reads no compacted shard: the parts (compacted/<D>/<attempt>/part-NNNNN.json) only.
resource "google_storage_bucket_iam_member" "reconciler_collect_read_parts" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["reconciler"].member
  condition {
    title      = "compacted-parts-only"
    expression = "${local.prefix_condition["compacted"]} && resource.name.endsWith(\".json\")"
  }
}

# Delete only, under snapshots/ and compacted/: no predefined object role deletes without also creating
# (objectUser, objectAdmin, storage.admin, legacyBucketWriter all create too), and with create it could replace
# a snapshot a job reads. Without storage.objects.create it can neither create nor overwrite anything (an
# overwrite needs create and delete).
resource "google_storage_bucket_iam_member" "reconciler_collect_delete" {
  bucket = var.bucket_name
  role   = google_project_iam_custom_role.object_deleter.name
  member = google_service_account.sa["reconciler"].member
  condition {
    title      = "snapshots-and-compacted"
    expression = "${local.prefix_condition["snapshots"]} || ${local.prefix_condition["compacted"]}"
  }
}

resource "google_project_iam_custom_role" "object_deleter" {
  project     = var.project_id
  role_id     = "landfallObjectDeleter"
  title       = "Landfall object deleter"
  description = "Delete Cloud Storage objects; nothing else. Bound on the data bucket with a prefix condition."
  permissions = [
    "storage.objects.delete",
  ]
}

# The results topic has exactly two publishers: this account and the trainer's.
resource "google_pubsub_topic_iam_member" "reconciler_publish_results" {
  project = var.project_id
  topic   = var.results_topic_name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.sa["reconciler"].member
}

# --- trainer ----------------------------------------------------------------

# trainer.training.inputs: the job's snapshot (snapshots/), its parts and compacted shards (compacted/), the delta's
# manifests and the shards they and the snapshot name in place (tfrecords/). Read only.
resource "google_storage_bucket_iam_member" "trainer_read_tfrecords" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["trainer"].member
  condition {
    title      = "tfrecords-snapshots-compacted"
    expression = "${local.prefix_condition["tfrecords"]} || ${local.prefix_condition["snapshots"]} || ${local.prefix_condition["compacted"]} || ${local.list_condition}"
  }
}

resource "google_storage_bucket_iam_member" "trainer_write_runs" {
  bucket = var.bucket_name
  # Checkpoints rewrite objects (the `checkpoint` index file), so objectUser.
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["trainer"].member
  condition {
    title      = "runs-only"
    expression = local.prefix_condition["runs"]
  }
}

# The verdict (trainer.judging.verdict): the chief reads and rewrites models/<dataset>/champion.json
# (generation-guarded) and creates models/<dataset>/history/<n>.json; nothing else there.
resource "google_storage_bucket_iam_member" "trainer_write_models" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["trainer"].member
  condition {
    title      = "models-only"
    expression = local.prefix_condition["models"]
  }
}

# The champion's view of new data (trainer.judging.champion_view.reuse): the chief reuses what the scorer already
# wrote for an arrival under this champion, scores/<dataset>/<arrival>/<champion job>/ (summary.json, the
# scores' Parquet). Read only: the scorer alone creates there.
resource "google_storage_bucket_iam_member" "trainer_read_scores" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["trainer"].member
  condition {
    title      = "scores-read"
    expression = local.prefix_condition["scores"]
  }
}

# The chief announces the run it finished on the results topic; publish only, on that topic only.
resource "google_pubsub_topic_iam_member" "trainer_publish_results" {
  project = var.project_id
  topic   = var.results_topic_name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.sa["trainer"].member
}

resource "google_service_account_iam_member" "trainer_workload_identity" {
  count              = local.vertex ? 0 : 1
  service_account_id = google_service_account.sa["trainer"].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.workload_pool}[${var.training_namespace}/${var.trainer_ksa}]"
}

# --- the vertex engine: Vertex AI custom jobs, no cluster -------------------------------------------------
# With LANDFALL_ENGINE=vertex the releasers (the submit function, and the reconcile job that stands in for the
# reconciler Deployment: infra/modules/functions) create each job as a CustomJob (landfall.submit.backends.customjobs):
# find it by its labels and display name (list, get), create it, and name the trainer account as the job's identity.
# CustomJobs have no IAM policy of their own (Vertex AI grants them on the project:
# https://cloud.google.com/vertex-ai/docs/general/access-control, read 2026-12-05), so the role is bound on the
# project; it holds nothing else of Vertex AI (no cancel, delete, models or endpoints). Naming an account as a job's
# identity needs iam.serviceAccounts.actAs on it (https://cloud.google.com/vertex-ai/docs/general/custom-service-account,
# read 2026-12-05): on the trainer account only; and the create-only claim runs/<job>/customjob.json. The jobs run as the trainer account, whose bucket and topic grants are the same on
# either engine; Vertex AI pulls the image with its own service agent, from the project's repository.
resource "google_project_iam_custom_role" "custom_job_submitter" {
  project     = var.project_id
  role_id     = "landfallCustomJobSubmitter"
  title       = "Landfall custom job submitter"
  description = "Find and create Vertex AI custom jobs (the vertex engine's releases); nothing else of Vertex AI."
  permissions = [
    "aiplatform.customJobs.create",
    "aiplatform.customJobs.get",
    "aiplatform.customJobs.list",
  ]
}

resource "google_project_iam_member" "vertex_releasers" {
  for_each = toset(local.vertex ? ["submitter", "reconciler"] : [])
  project  = var.project_id
  role     = google_project_iam_custom_role.custom_job_submitter.name
  member   = google_service_account.sa[each.key].member
}

resource "google_service_account_iam_member" "vertex_releasers_act_as_trainer" {
  for_each           = toset(local.vertex ? ["submitter", "reconciler"] : [])
  service_account_id = google_service_account.sa["trainer"].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.sa[each.key].member
}

# The create-only claim that makes one releaser the creator of a CustomJob (Vertex AI has no create-only name):
# created, read, and taken over (rewritten on its generation: create and delete) after a crash.
resource "google_storage_bucket_iam_member" "vertex_releasers_claim" {
  for_each = toset(local.vertex ? ["submitter", "reconciler"] : [])
  bucket   = var.bucket_name
  role     = "roles/storage.objectUser"
  member   = google_service_account.sa[each.key].member
  condition {
    title      = "custom-job-claims"
    expression = "${local.prefix_condition["runs"]} && resource.name.endsWith(\"/customjob.json\")"
  }
}

# Cloud Scheduler's job (infra/modules/schedule) starts the reconcile job as the scheduler account: run only, on that
# job only (google_cloud_run_v2_job_iam_member in infra/modules/functions). No predefined role runs a job without
# more (roles/run.jobsExecutorWithOverrides also overrides and cancels).
resource "google_project_iam_custom_role" "job_runner" {
  project     = var.project_id
  role_id     = "landfallJobRunner"
  title       = "Landfall job runner"
  description = "Start an execution of one Cloud Run job, without overrides; bound on the job."
  permissions = [
    "run.jobs.run",
  ]
}

# --- invoker (Pub/Sub push identity) ----------------------------------------
# Both functions are fed by push subscriptions (infra/modules/functions): the invoker
# only calls them. Its roles/run.invoker is bound on each function's own Cloud Run
# service (google_cloud_run_v2_service_iam_member in infra/modules/functions), not on
# the project with a condition: Cloud Run does not recognize resource attributes in
# IAM Conditions, so a resource.name condition there would never grant anything.

# Pub/Sub pushes to on-data-arrival and on-training-request with an OIDC token of
# the invoker account: its service agent may mint tokens for that one account only.
resource "google_service_account_iam_member" "pubsub_agent_invoker_tokens" {
  service_account_id = google_service_account.sa["invoker"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

# The scorer's push subscriptions (infra/modules/scorer) push with an OIDC token of its own push
# identity, scorer-invoker: the agent may mint tokens for that account too, and for no other.
resource "google_service_account_iam_member" "pubsub_agent_scorer_invoker_tokens" {
  service_account_id = google_service_account.sa["scorer-invoker"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

# The Cloud Storage service agent publishes the bucket's incoming/ notifications:
# its grant is on that one topic (infra/modules/pubsub), not project-wide.

# --- scorer (Cloud Run service landfall-scorer, infra/modules/scorer) -------------------------
# Detections on arrival (landfall.detect): every committed arrival (its training request) and every
# score request is scored with the dataset's champion, as `landfall score` scores a file. It reads
# the arrival's source object at its generation (a series dataset) or its shards (an instance
# dataset), its manifest and retraction record, the dataset's spec, the champion record and the
# champion's model, writes its results create-only under
# scores/<dataset>/<arrival>/<champion job>/ and publishes on landfall-detections. It writes nothing
# else: not incoming/, tfrecords/, models/ or runs/, no training request or result, no cluster.
# Its logs are its container's stdout/stderr, which Cloud Run sends to Cloud Logging: no grant.

# The arrival's source object (read at the manifest's generation). Listing is checked on the bucket:
# the champion's model is listed before it is downloaded (runs/<job>/model/).
resource "google_storage_bucket_iam_member" "scorer_read_incoming" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["scorer"].member
  condition {
    title      = "incoming-only"
    expression = "${local.prefix_condition["incoming"]} || ${local.list_condition}"
  }
}

# tfrecords/<dataset>/<arrival>/: manifest.json (the arrival, its source and generation),
# retracted.json (is it retracted) and, for an instance dataset, the shards the manifest lists
# (landfall.detect.score.score_instances scores the records). Read only.
resource "google_storage_bucket_iam_member" "scorer_read_arrival_records" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["scorer"].member
  condition {
    title      = "tfrecords-read-only"
    expression = local.prefix_condition["tfrecords"]
  }
}

# models/<dataset>/champion.json: which job is the champion; not its history.
resource "google_storage_bucket_iam_member" "scorer_read_champion" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["scorer"].member
  condition {
    title      = "champion-records-only"
    expression = "${local.prefix_condition["models"]} && resource.name.endsWith(\"/champion.json\")"
  }
}

# The champion's model: runs/<job>/model/ (the SavedModel, threshold.json, normalization.json). Read
# only, and on runs/ as a whole: a condition can test a name's start and end, and the model's files sit
# below a job name no prefix can skip, with names (the SavedModel's variables) no fixed suffix list covers.
resource "google_storage_bucket_iam_member" "scorer_read_models" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["scorer"].member
  condition {
    title      = "runs-read-only"
    expression = local.prefix_condition["runs"]
  }
}

# scores/<dataset>/<arrival>/<champion job>/: read (is an attempt done, published?) and create, never
# replace or delete (objectCreator + objectViewer, not objectUser): every result object is created
# with ifGenerationMatch=0, which needs storage.objects.create only.
resource "google_storage_bucket_iam_member" "scorer_read_scores" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["scorer"].member
  condition {
    title      = "scores-read"
    expression = local.prefix_condition["scores"]
  }
}

resource "google_storage_bucket_iam_member" "scorer_create_scores" {
  bucket = var.bucket_name
  role   = "roles/storage.objectCreator"
  member = google_service_account.sa["scorer"].member
  condition {
    title      = "scores-create-only"
    expression = local.prefix_condition["scores"]
  }
}

# One landfall.detection/v1 per scored arrival, on the detections topic only.
resource "google_pubsub_topic_iam_member" "scorer_publish_detections" {
  project = var.project_id
  topic   = var.detections_topic_name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.sa["scorer"].member
}

# scorer-invoker calls the scorer service and nothing else: roles/run.invoker is bound on that
# service (google_cloud_run_v2_service_iam_member in infra/modules/scorer).

# --- GKE nodes --------------------------------------------------------------

resource "google_project_iam_member" "nodes_default" {
  count   = local.vertex ? 0 : 1
  project = var.project_id
  role    = "roles/container.defaultNodeServiceAccount"
  member  = google_service_account.sa["gke-nodes"].member
}

resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  count      = local.vertex ? 0 : 1
  project    = var.project_id
  location   = var.repository_location
  repository = var.repository_name
  role       = "roles/artifactregistry.reader"
  member     = google_service_account.sa["gke-nodes"].member
}

# --- function builds --------------------------------------------------------
# Cloud Functions builds run as this account: they write build logs, read the source
# archive and push the function image to the functions' own repository
# (build_config.docker_repository, infra/modules/registry), not to Google's
# gcf-artifacts and never to the trainer repository.

# Build logs: a log entry's only parent is the project, so logWriter has no narrower scope.
resource "google_project_iam_member" "fn_build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.sa["fn-build"].member
}

resource "google_artifact_registry_repository_iam_member" "fn_build_push" {
  project    = var.project_id
  location   = var.repository_location
  repository = var.functions_repository_name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.sa["fn-build"].member
}

# The source archive: our sources bucket, and Cloud Functions' staging bucket of this
# region (gcf-v2-sources-NUMBER-REGION), where it copies the archive. Each prefix ends
# in "/", so no other bucket whose name merely starts the same way matches; the exact
# bucket names admit the bucket resource itself.
resource "google_project_iam_member" "fn_build_sources" {
  project = var.project_id
  role    = "roles/storage.objectViewer"
  member  = google_service_account.sa["fn-build"].member
  condition {
    title = "function-sources-only"
    expression = join(" || ", flatten([
      for b in ["gcf-v2-sources-${data.google_project.this.number}-${var.region}", var.sources_bucket_name] : [
        "resource.name == \"projects/_/buckets/${b}\"",
        "resource.name.startsWith(\"projects/_/buckets/${b}/\")",
      ]
    ]))
  }
}

# --- Cloud Build: two identities ---------------------------------------------
# A build runs as one service account, so testing and deploying are two triggers
# (infra/modules/triggers): cloudbuild.yaml runs `make test` as landfall-test, and only
# when it succeeds cloudbuild-deploy.yaml runs as landfall-build. Code from the
# repository and PyPI executes only under landfall-test.

# landfall-test: build logs (a log entry's only parent is the project). The tests are
# offline (emulators, rendered manifests, parsed Terraform): no other access.
resource "google_project_iam_member" "test_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.sa["test"].member
}

# landfall-build (deploy). What cloudbuild-deploy.yaml does, and the grant for each:
#   docker push                -> artifactregistry.writer on the trainer repository only
#   terraform apply functions  -> on each resource of the functions root, bound on that
#                                 resource (infra/modules/functions): the function deployer
#                                 role on the two functions, the service IAM role on their
#                                 Cloud Run services, the subscription deployer role on the
#                                 two push subscriptions; operations viewer on the project
#                                 (operations have no narrower parent); actAs on exactly the
#                                 accounts those resources name; objects in the sources and
#                                 state buckets
#   kubectl apply -k overlay   -> container.clusterViewer (credentials only) + the
#                                 landfall-deployer RBAC in k8s/base (named objects)
#   the convert job            -> push the converter image to the same repository as the
#                                 trainer's; the landfall job deployer role bound on that
#                                 job; actAs its account (convert-job)

# Build logs: a log entry's only parent is the project.
resource "google_project_iam_member" "build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.sa["build"].member
}

resource "google_artifact_registry_repository_iam_member" "build_push" {
  project    = var.project_id
  location   = var.repository_location
  repository = var.repository_name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.sa["build"].member
}

# --- what landfall-build may do to the resources of the functions root ------------------
# The functions root (infra/envs/<env>/functions) is applied first by an administrator,
# which creates the two functions, their Cloud Run services, the convert job and the two
# push subscriptions; every later apply is landfall-build's. So each of its rights there is
# granted on the resource itself (in infra/modules/functions, next to the resource), with
# these custom roles: update, read and read-IAM only, no create, delete or run. Conditions
# on resource.name cannot do this: neither Cloud Functions, Cloud Run nor Pub/Sub recognizes
# resource attributes, so such a condition would grant nothing (tests/infra/gcp_rules.py).
# Replacing one of these resources (a rename, a changed topic) is an administrator's apply.
resource "google_project_iam_custom_role" "function_deployer" {
  project     = var.project_id
  role_id     = "landfallFunctionDeployer"
  title       = "Landfall function deployer"
  description = "Update one Cloud Run function (source, build, service config) and read its IAM; bound on the function."
  permissions = [
    "cloudfunctions.functions.get",
    "cloudfunctions.functions.getIamPolicy",
    "cloudfunctions.functions.sourceCodeGet",
    "cloudfunctions.functions.sourceCodeSet",
    "cloudfunctions.functions.update",
  ]
}

# The invoker's binding on each function's Cloud Run service is managed in the functions root:
# reading it on every plan needs getIamPolicy, (re)creating it setIamPolicy, on that service.
resource "google_project_iam_custom_role" "service_iam" {
  project     = var.project_id
  role_id     = "landfallServiceIamManager"
  title       = "Landfall function service IAM"
  description = "Read a function's Cloud Run service and manage who may invoke it; bound on the service."
  permissions = [
    "run.services.get",
    "run.services.getIamPolicy",
    "run.services.setIamPolicy",
  ]
}

resource "google_project_iam_custom_role" "subscription_deployer" {
  project     = var.project_id
  role_id     = "landfallSubscriptionDeployer"
  title       = "Landfall subscription deployer"
  description = "Update one of Landfall's push subscriptions and its IAM; bound on the subscription."
  permissions = [
    "pubsub.subscriptions.get",
    "pubsub.subscriptions.getIamPolicy",
    "pubsub.subscriptions.setIamPolicy",
    "pubsub.subscriptions.update",
  ]
}

# The scorer's Cloud Run service (infra/modules/scorer): update it (a new image, its settings) and
# keep the push identity's invoker binding on it, bound on that service; no create, delete or invoke.
resource "google_project_iam_custom_role" "service_deployer" {
  project     = var.project_id
  role_id     = "landfallServiceDeployer"
  title       = "Landfall service deployer"
  description = "Update Landfall's Cloud Run service (the scorer) and its IAM; invoke nothing. Bound on the service."
  permissions = [
    "run.services.get",
    "run.services.getIamPolicy",
    "run.services.setIamPolicy",
    "run.services.update",
  ]
}

resource "google_storage_bucket_iam_member" "build_buckets" {
  for_each = toset([var.sources_bucket_name, var.state_bucket])
  bucket   = each.key
  role     = "roles/storage.objectAdmin"
  member   = google_service_account.sa["build"].member
}

# The Cloud Run job landfall-convert: update it and bind who may run it (setIamPolicy on
# it), bound on the job; it cannot run jobs (run.jobs.run*) or touch services.
resource "google_project_iam_custom_role" "job_deployer" {
  project     = var.project_id
  role_id     = "landfallJobDeployer"
  title       = "Landfall job deployer"
  description = "Update Landfall's Cloud Run job and its IAM; run nothing. Bound on the job."
  permissions = [
    "run.jobs.get",
    "run.jobs.getIamPolicy",
    "run.jobs.setIamPolicy",
    "run.jobs.update",
  ]
}

# Terraform polls the long-running operations of function and job updates. An operation
# (projects/P/locations/R/operations/O) has no IAM policy of its own: its permission is
# checked on the project, so this role is bound there, unconditioned (a condition on the
# operation's name would never grant: neither service recognizes resource attributes).
resource "google_project_iam_custom_role" "operations_viewer" {
  project     = var.project_id
  role_id     = "landfallOperationsViewer"
  title       = "Landfall deploy operations viewer"
  description = "Poll the long-running operations of Cloud Functions and Cloud Run updates; nothing else."
  permissions = [
    "cloudfunctions.operations.get",
    "run.operations.get",
  ]
}

resource "google_project_iam_member" "build_operations" {
  project = var.project_id
  role    = google_project_iam_custom_role.operations_viewer.name
  member  = google_service_account.sa["build"].member
}

# Credentials for the cluster (container.clusters.get) and nothing in Kubernetes: the
# landfall-deployer ClusterRole/Role in k8s/base grant what kubectl apply needs.
resource "google_project_iam_member" "build_cluster_access" {
  count   = local.vertex ? 0 : 1
  project = var.project_id
  role    = "roles/container.clusterViewer"
  member  = google_service_account.sa["build"].member
}

# --- dataset specs (config/datasets/<dataset>.json, landfall.core.artifacts.specs) --------------------
# The deploy build applies the reviewed datasets/ folder (`landfall datasets apply`: a read of the
# current generation, then a write conditional on it, which overwrites: objectUser, as the
# converter's rewritten records); only there, and the arrival function's window estimate (below). Every stage reads a dataset's spec by name (get,
# no list): objectViewer on that prefix alone.
resource "google_storage_bucket_iam_member" "build_apply_specs" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["build"].member
  condition {
    title      = "dataset-specs-only"
    expression = local.prefix_condition["config/datasets"]
  }
}

# `shape.window.length: auto` (landfall.arrival.autowindow): a dataset's first arrival, in the arrival function,
# writes the period it estimated into the spec's next generation, conditional on the generation it read (an
# overwrite: create and delete, objectUser, as the build). Only the function: it estimates before it converts or
# dispatches, so the convert job reads a number. Only that prefix.
resource "google_storage_bucket_iam_member" "converter_estimates_windows" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["converter"].member
  condition {
    title      = "dataset-specs-window-estimate"
    expression = local.prefix_condition["config/datasets"]
  }
}

resource "google_storage_bucket_iam_member" "read_specs" {
  for_each = toset(["converter", "convert-job", "submitter", "reconciler", "trainer", "scorer"])
  bucket   = var.bucket_name
  role     = "roles/storage.objectViewer"
  member   = google_service_account.sa[each.key].member
  condition {
    title      = "dataset-specs-read"
    expression = local.prefix_condition["config/datasets"]
  }
}

# --- labelled evaluation sets (config/labelled/<dataset>/<sha256>.npz + .json, landfall.core.artifacts.labelled) ---
# `landfall datasets apply` (the deploy build) converts a spec's labelled file and stores it create-only,
# content-addressed, manifest last: it reads the manifest by name (is the set there?) and creates both
# objects; it never overwrites or deletes one (objectCreator + objectViewer, not objectUser). The trainer
# reads the set its job names (--labelled); no other stage touches it.
resource "google_storage_bucket_iam_member" "build_create_labelled" {
  bucket = var.bucket_name
  role   = "roles/storage.objectCreator"
  member = google_service_account.sa["build"].member
  condition {
    title      = "labelled-sets-create"
    expression = local.prefix_condition["config/labelled"]
  }
}

resource "google_storage_bucket_iam_member" "read_labelled" {
  for_each = toset(["build", "trainer"])
  bucket   = var.bucket_name
  role     = "roles/storage.objectViewer"
  member   = google_service_account.sa[each.key].member
  condition {
    title      = "labelled-sets-read"
    expression = local.prefix_condition["config/labelled"]
  }
}

# Exactly the accounts the functions root names: the two runtime accounts
# (converter, submitter), the push identity of the two subscriptions (invoker), the
# functions' build account (fn-build), the convert job's account (convert-job), and the
# scorer service's account (scorer) and its push identity (scorer-invoker); with the vertex
# engine also the reconcile job's (reconciler).
resource "google_service_account_iam_member" "build_act_as" {
  for_each           = toset(concat(["converter", "submitter", "invoker", "fn-build", "convert-job", "scorer", "scorer-invoker"], local.vertex ? ["reconciler"] : []))
  service_account_id = google_service_account.sa[each.key].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.sa["build"].member
}
