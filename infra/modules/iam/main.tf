# One service account per workload, each holding only what its work needs.
# No keys are created anywhere: functions run as their account, pods use
# Workload Identity, Cloud Build runs as its account.

locals {
  objects = "projects/_/buckets/${var.bucket_name}/objects"
  # Object-level grants limited to a prefix. Listing is checked against the bucket
  # itself, so the viewer conditions also admit the bucket resource (names only).
  prefix_condition = {
    for p in ["incoming", "tfrecords", "runs", "rejected", "tmp", "requests"] :
    p => "resource.name.startsWith(\"${local.objects}/${p}/\")"
  }
  list_condition = "resource.type == \"storage.googleapis.com/Bucket\""

  accounts = {
    converter = "Landfall converter (on-data-arrival): incoming/ -> tfrecords/, publishes training requests"
    submitter = "Landfall submitter (on-training-request): reads manifests, creates TFJobs"
    trainer   = "Landfall trainer (TFJob pods via Workload Identity): tfrecords/ -> runs/"
    invoker   = "Landfall invoker: Pub/Sub push identity that calls the functions"
    gke-nodes = "Landfall GKE nodes: logs, metrics, image pulls"
    build     = "Landfall Cloud Build: tests, pushes the image, deploys functions and manifests"
    fn-build  = "Landfall function builds: builds the functions' containers"
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

# --- submitter --------------------------------------------------------------

resource "google_storage_bucket_iam_member" "submitter_read_manifests" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["submitter"].member
  condition {
    title      = "tfrecords-only"
    expression = "${local.prefix_condition["tfrecords"]} || ${local.list_condition}"
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
# dataset's next job under requests/ (written, read, deleted once covered), and each
# released job's runs/<job>/inputs.json and submitted.json (created once, read). Nothing
# else under runs/: the trainer's metrics and models stay out of its reach.
resource "google_storage_bucket_iam_member" "submitter_bookkeeping" {
  bucket = var.bucket_name
  role   = "roles/storage.objectUser"
  member = google_service_account.sa["submitter"].member
  condition {
    title      = "requests-and-job-inputs"
    expression = "${local.prefix_condition["requests"]} || (${local.prefix_condition["runs"]} && (resource.name.endsWith(\"/inputs.json\") || resource.name.endsWith(\"/submitted.json\")))"
  }
}

# Reaching the cluster's API needs container.clusters.get to authenticate; that is
# all IAM grants (clusterViewer: read cluster metadata, no Kubernetes objects). The
# Role/RoleBinding in k8s/base (create/get/list tfjobs in
# landfall-training, bound to this account's email) does the rest. Project-wide
# container.developer would let it write any object in any namespace, so it is not used.
resource "google_project_iam_member" "submitter_cluster_access" {
  project = var.project_id
  role    = "roles/container.clusterViewer"
  member  = google_service_account.sa["submitter"].member
}

# The landfall-reconciler Deployment (k8s/base/reconciler.yaml) runs in the cluster
# as the landfall-submitter KSA and releases follow-up TFJobs; releasing lists the
# dataset's manifests, so it acts as this account (tfrecords/ read above; RBAC for
# the tfjobs). The binding names that one KSA, nothing else in the namespace.
resource "google_service_account_iam_member" "submitter_workload_identity" {
  service_account_id = google_service_account.sa["submitter"].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.workload_pool}[${var.training_namespace}/${var.submitter_ksa}]"
}

# --- trainer ----------------------------------------------------------------

resource "google_storage_bucket_iam_member" "trainer_read_tfrecords" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = google_service_account.sa["trainer"].member
  condition {
    title      = "tfrecords-only"
    expression = "${local.prefix_condition["tfrecords"]} || ${local.list_condition}"
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

resource "google_service_account_iam_member" "trainer_workload_identity" {
  service_account_id = google_service_account.sa["trainer"].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.workload_pool}[${var.training_namespace}/${var.trainer_ksa}]"
}

# --- invoker (Pub/Sub push identity) ----------------------------------------
# Both functions are fed by push subscriptions (infra/modules/functions): the
# invoker only calls them, on these Cloud Run services only.

resource "google_project_iam_member" "invoker_run_invoker" {
  project = var.project_id
  role    = "roles/run.invoker"
  member  = google_service_account.sa["invoker"].member
  condition {
    title = "landfall-functions-only"
    expression = join(" || ", [
      for f in var.function_names :
      "resource.name == \"projects/${var.project_id}/locations/${var.region}/services/${f}\""
    ])
  }
}

# Pub/Sub pushes to on-data-arrival and on-training-request with an OIDC token of
# the invoker account: its service agent may mint tokens for that one account only.
resource "google_service_account_iam_member" "pubsub_agent_invoker_tokens" {
  service_account_id = google_service_account.sa["invoker"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

# The Cloud Storage service agent publishes the bucket's incoming/ notifications:
# its grant is on that one topic (infra/modules/pubsub), not project-wide.

# --- GKE nodes --------------------------------------------------------------

resource "google_project_iam_member" "nodes_default" {
  project = var.project_id
  role    = "roles/container.defaultNodeServiceAccount"
  member  = google_service_account.sa["gke-nodes"].member
}

resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  project    = var.project_id
  location   = var.repository_location
  repository = var.repository_name
  role       = "roles/artifactregistry.reader"
  member     = google_service_account.sa["gke-nodes"].member
}

# --- function builds --------------------------------------------------------

resource "google_project_iam_member" "fn_build" {
  for_each = toset(["roles/logging.logWriter", "roles/artifactregistry.writer"])
  project  = var.project_id
  role     = each.key
  member   = google_service_account.sa["fn-build"].member
}

resource "google_project_iam_member" "fn_build_sources" {
  project = var.project_id
  role    = "roles/storage.objectViewer"
  member  = google_service_account.sa["fn-build"].member
  condition {
    title      = "function-sources-only"
    expression = "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-\") || resource.name.startsWith(\"projects/_/buckets/${var.sources_bucket_name}\")"
  }
}

# --- Cloud Build ------------------------------------------------------------
# What cloudbuild.yaml does, and nothing else:
#   make test                 -> logs only
#   docker push               -> artifactregistry.writer on the trainer repository
#   terraform apply functions -> cloudfunctions.developer, pubsub.editor (the two
#                                push subscriptions), actAs on the function,
#                                invoker (OIDC push identity) and build accounts,
#                                objects in the sources and state buckets
#   kubectl apply -k overlay  -> container.developer (+ the landfall-deployer RBAC in
#                                k8s/base for the Role, RoleBinding, Namespace and
#                                StorageClass it manages)

resource "google_project_iam_member" "build" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/cloudfunctions.developer",
    "roles/pubsub.editor",
    "roles/container.developer",
  ])
  project = var.project_id
  role    = each.key
  member  = google_service_account.sa["build"].member
}

resource "google_artifact_registry_repository_iam_member" "build_push" {
  project    = var.project_id
  location   = var.repository_location
  repository = var.repository_name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.sa["build"].member
}

resource "google_storage_bucket_iam_member" "build_buckets" {
  for_each = toset([var.sources_bucket_name, var.state_bucket])
  bucket   = each.key
  role     = "roles/storage.objectAdmin"
  member   = google_service_account.sa["build"].member
}

resource "google_service_account_iam_member" "build_act_as" {
  for_each           = toset(["converter", "submitter", "invoker", "fn-build"])
  service_account_id = google_service_account.sa[each.key].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.sa["build"].member
}
