# The two gen2 Cloud Functions. Their source is the functions/ folder zipped; the
# object name carries the archive's hash, so a code change is a new object and a
# redeploy, and an unchanged tree is a no-op.

# Only main.py, requirements.txt and landfall/{core,arrival,submit} deploy. The laptop stack
# (landfall/local), the command line (landfall/cli) and its read model (landfall/views), the reconciler (it runs in the trainer
# image) and the scorer (landfall/detect and landfall/core/scoring.py: TensorFlow, its own Cloud Run service) stay out, with build metadata and caches. The excludes are doublestar globs on paths
# relative to source_dir; tests/functions/test_archive.py builds this archive and imports it.
data "archive_file" "functions" {
  type        = "zip"
  source_dir  = var.source_dir
  output_path = "${path.root}/.terraform/functions-source.zip"
  excludes = [
    "landfall/local/**",
    "landfall/cli/**",
    "landfall/views/**",
    "landfall/reconcile/**",
    "landfall/detect/**",
    "landfall/core/scoring.py",
    "**/*.egg-info/**",
    "**/__pycache__/**",
    "**/*.pyc",
    ".pytest_cache/**",
  ]
}

resource "google_storage_bucket_object" "source" {
  name   = "functions/functions-${data.archive_file.functions.output_sha256}.zip"
  bucket = var.sources_bucket_name
  source = data.archive_file.functions.output_path
}

# Each function gets only the settings its configuration class reads
# (Settings.load reads LANDFALL_<FIELD>; tests/infra checks the names against the
# classes): on-data-arrival reads landfall.arrival.config.ConverterConfig and Layout (the
# bucket comes from the event), on-training-request landfall.submit.config.JobConfig and
# Layout. Only the submitter holds the cluster endpoint and CA.
locals {
  # The vertex engine (docs/deploying.md, "Vertex AI: no cluster"): the submit function creates Vertex AI custom jobs
  # (the customjobs backend) in this region, and the reconcile job below does what the reconciler Deployment does
  # next to a cluster.
  vertex = var.engine == "vertex"
  # Each converter's memory in MiB ("2Gi" or "512Mi"): a Parquet file too wide for it is rejected up
  # front (landfall.arrival.formats, parquet_too_wide) instead of being killed on every retry.
  memory_mib = {
    for name, size in { converter = var.converter.memory, convert_job = var.convert_job.memory } :
    name => endswith(size, "Gi") ? tonumber(trimsuffix(size, "Gi")) * 1024 : tonumber(trimsuffix(size, "Mi"))
  }
  converter_env = {
    GOOGLE_CLOUD_PROJECT      = var.project_id
    LANDFALL_REQUEST_TOPIC    = var.request_topic_id
    LANDFALL_MEMORY_LIMIT_MIB = tostring(local.memory_mib.converter)
    # Above its size threshold (landfall.arrival.route) an arrival is converted by this job's
    # tasks: the function starts one execution, at most max_tasks tasks (the job's parallelism).
    LANDFALL_CONVERT_JOB = google_cloud_run_v2_job.convert.id
    LANDFALL_MAX_TASKS   = tostring(var.convert_job.parallelism)
    # One arrival in 64 (by request id) starts an execution of the job that compacts the dataset past
    # landfall.arrival.compaction's thresholds; the job's account holds compacted/ and snapshots/ (modules/iam).
    LANDFALL_COMPACT_EVERY = "64"
  }
  # The job's tasks (python -m landfall.arrival.task) read ConverterConfig too; the execution adds
  # LANDFALL_SOURCE_BUCKET/NAME/GENERATION, Cloud Run CLOUD_RUN_TASK_INDEX/COUNT.
  convert_job_env = {
    GOOGLE_CLOUD_PROJECT      = var.project_id
    LANDFALL_REQUEST_TOPIC    = var.request_topic_id
    LANDFALL_MEMORY_LIMIT_MIB = tostring(local.memory_mib.convert_job)
  }
  submitter_env = {
    GOOGLE_CLOUD_PROJECT              = var.project_id
    LANDFALL_BUCKET                   = var.bucket_name
    LANDFALL_BACKEND                  = local.vertex ? "customjobs" : "kubernetes"
    LANDFALL_GKE_ENDPOINT             = local.vertex ? "" : var.gke_endpoint
    LANDFALL_GKE_CA_CERT              = local.vertex ? "" : var.gke_ca_certificate
    LANDFALL_NAMESPACE                = var.namespace
    LANDFALL_REGION                   = var.region
    LANDFALL_ENGINE                   = var.engine
    LANDFALL_TRAINER_IMAGE            = var.trainer_image
    LANDFALL_TRAINER_SERVICE_ACCOUNT  = var.trainer_service_account
    LANDFALL_REQUEST_TOPIC            = var.request_topic_id
    LANDFALL_DEAD_LETTER_SUBSCRIPTION = var.dead_letter_subscription
  }
}

resource "google_cloudfunctions2_function" "on_data_arrival" {
  project     = var.project_id
  name        = "on-data-arrival"
  location    = var.region
  description = "Converts uploads under incoming/ to TFRecord shards and publishes a training request."
  labels      = var.labels

  build_config {
    runtime         = "python311"
    entry_point     = "on_data_arrival"
    service_account = "projects/${var.project_id}/serviceAccounts/${var.service_accounts.fn-build}"
    # The functions' own repository (infra/modules/registry), where fn-build may push;
    # not Google's gcf-artifacts, which would need a project-wide writer grant.
    docker_repository = var.docker_repository
    source {
      storage_source {
        bucket = var.sources_bucket_name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory                 = var.converter.memory
    available_cpu                    = var.converter.cpu
    timeout_seconds                  = var.converter.timeout_seconds
    max_instance_count               = var.converter.max_instances
    min_instance_count               = 0
    max_instance_request_concurrency = var.converter.concurrency
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = var.service_accounts.converter
    environment_variables            = local.converter_env
  }
}

resource "google_cloudfunctions2_function" "on_training_request" {
  project     = var.project_id
  name        = "on-training-request"
  location    = var.region
  description = "Reads a TFRecord manifest from a training request and creates the TFJob."
  labels      = var.labels

  build_config {
    runtime         = "python311"
    entry_point     = "on_training_request"
    service_account = "projects/${var.project_id}/serviceAccounts/${var.service_accounts.fn-build}"
    # The functions' own repository (infra/modules/registry), where fn-build may push;
    # not Google's gcf-artifacts, which would need a project-wide writer grant.
    docker_repository = var.docker_repository
    source {
      storage_source {
        bucket = var.sources_bucket_name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory                 = var.submitter.memory
    available_cpu                    = var.submitter.cpu
    timeout_seconds                  = var.submitter.timeout_seconds
    max_instance_count               = var.submitter.max_instances
    min_instance_count               = 0
    max_instance_request_concurrency = var.submitter.concurrency
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    # The control plane admits listed networks only: the private endpoint, through
    # the VPC connector (private ranges only; Google APIs still go out directly).
    vpc_connector                 = var.vpc_connector
    vpc_connector_egress_settings = "PRIVATE_RANGES_ONLY"
    service_account_email         = var.service_accounts.submitter
    environment_variables         = local.submitter_env
  }
}

# Large arrivals: the Cloud Run job on-data-arrival starts (landfall.arrival.route), one
# execution per arrival, each task converting a share of the object (landfall.arrival.ranged)
# from the converter image (converter/Dockerfile, pushed by Cloud Build as converter:$SHORT_SHA).
# task_count is the job's default; every execution overrides it from the object's size.
resource "google_cloud_run_v2_job" "convert" {
  project             = var.project_id
  name                = var.convert_job.name
  location            = var.region
  labels              = var.labels
  deletion_protection = false

  template {
    labels      = var.labels
    task_count  = 1
    parallelism = var.convert_job.parallelism

    template {
      service_account = var.service_accounts.convert-job
      timeout         = "${var.convert_job.timeout_seconds}s"
      max_retries     = var.convert_job.max_retries

      containers {
        image = var.converter_image
        resources {
          limits = {
            cpu    = var.convert_job.cpu
            memory = var.convert_job.memory
          }
        }
        dynamic "env" {
          for_each = local.convert_job_env
          content {
            name  = env.key
            value = env.value
          }
        }
      }
    }
  }
}

# The converter function's account may start this job with overrides (task count, env), on
# this job only: no project-wide Cloud Run grant.
resource "google_cloud_run_v2_job_iam_member" "converter_runs_convert_job" {
  project  = var.project_id
  location = google_cloud_run_v2_job.convert.location
  name     = google_cloud_run_v2_job.convert.name
  role     = "roles/run.jobsExecutorWithOverrides"
  member   = "serviceAccount:${var.service_accounts.converter}"
}

# Who may deploy the job after the administrator's first apply: landfall-build, bound on the
# job itself (update and its IAM; no create, delete or run). Cloud Run does not recognize
# resource attributes in IAM Conditions, so a project grant conditioned on the job's name
# would grant nothing.
resource "google_cloud_run_v2_job_iam_member" "build_deploys_convert_job" {
  project  = var.project_id
  location = google_cloud_run_v2_job.convert.location
  name     = google_cloud_run_v2_job.convert.name
  role     = var.deployer_roles.job
  member   = "serviceAccount:${var.service_accounts.build}"
}

# --- the vertex engine's reconciler ------------------------------------------------------------------------
# No cluster, so no reconciler Deployment (k8s/base/reconciler.yaml): this Cloud Run job runs the same loop,
# `landfall reconcile --for-seconds 50`, started every minute by Cloud Scheduler (infra/modules/schedule, in the
# platform). It releases waiting follow-ups (as the submit function renders them: the same settings), announces jobs
# that ended without a chief, and, in the execution that starts in an hour's first minute, applies the snapshots'
# collection rule. It runs as the reconciler account, from the converter image (the landfall package without
# TensorFlow). A task that outlives its minute overlaps the next execution, which is harmless (create-only records),
# and the timeout bounds it; a failed execution is followed by the next minute's, so none is retried.
resource "google_cloud_run_v2_job" "reconcile" {
  count               = local.vertex ? 1 : 0
  project             = var.project_id
  name                = var.reconcile_job_name
  location            = var.region
  labels              = var.labels
  deletion_protection = false

  template {
    labels      = var.labels
    task_count  = 1
    parallelism = 1

    template {
      service_account = var.service_accounts.reconciler
      timeout         = "120s"
      max_retries     = 0

      containers {
        image   = var.converter_image
        command = ["python", "-m", "landfall.cli", "reconcile"]
        args    = ["--for-seconds", "50"]
        resources {
          limits = {
            cpu    = "1"
            memory = "512Mi"
          }
        }
        dynamic "env" {
          for_each = local.submitter_env
          content {
            name  = env.key
            value = env.value
          }
        }
      }
    }
  }
}

# The schedule's account may start this job, nothing else (a custom role: run.jobs.run only).
resource "google_cloud_run_v2_job_iam_member" "scheduler_runs_reconcile_job" {
  count    = local.vertex ? 1 : 0
  project  = var.project_id
  location = google_cloud_run_v2_job.reconcile[0].location
  name     = google_cloud_run_v2_job.reconcile[0].name
  role     = var.deployer_roles.job_runner
  member   = "serviceAccount:${var.service_accounts.scheduler}"
}

# landfall-build deploys it (a new image) as it does the convert job: update and its IAM, on this job only.
resource "google_cloud_run_v2_job_iam_member" "build_deploys_reconcile_job" {
  count    = local.vertex ? 1 : 0
  project  = var.project_id
  location = google_cloud_run_v2_job.reconcile[0].location
  name     = google_cloud_run_v2_job.reconcile[0].name
  role     = var.deployer_roles.job
  member   = "serviceAccount:${var.service_accounts.build}"
}

# Neither function has an Eventarc trigger: each is fed by a push subscription
# we own, because only a subscription we own can carry the dead-letter topic, the
# retry backoff and the retention. Pub/Sub pushes with an OIDC token of the invoker
# account (roles/run.invoker on these two services only), and the Functions
# Framework turns the push body into the same CloudEvent
# (google.cloud.pubsub.topic.v1.messagePublished) an Eventarc trigger would send.
resource "google_pubsub_subscription" "training_requests" {
  project = var.project_id
  name    = "landfall-training-requests-submit"
  topic   = var.request_topic_id
  labels  = var.labels

  # Ordering by dataset (the publisher's ordering key) is only an optimisation: fewer
  # concurrent handlers per dataset. Correctness never depends on it (landfall.submit.coalesce).
  enable_message_ordering = true

  # A non-2xx answer or a timeout is a nack: the request is retried with backoff.
  ack_deadline_seconds       = var.submitter.timeout_seconds
  message_retention_duration = "604800s"
  retain_acked_messages      = false

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = var.dead_letter_topic_id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  push_config {
    push_endpoint = google_cloudfunctions2_function.on_training_request.service_config[0].uri
    oidc_token {
      service_account_email = var.service_accounts.invoker
      audience              = google_cloudfunctions2_function.on_training_request.service_config[0].uri
    }
  }
}

# on-data-arrival is fed by the data bucket's Cloud Storage notification
# (infra/modules/pubsub): JSON_API_V1, objects under incoming/ only, finalized,
# deleted or archived. Nothing the system writes (tfrecords/, tmp/, rejected/,
# runs/) reaches this subscription, so no write starts a function.
resource "google_pubsub_subscription" "arrivals" {
  project = var.project_id
  name    = "landfall-gcs-notifications-arrival"
  topic   = var.notification_topic_id
  labels  = var.labels

  # A non-2xx answer or a timeout is a nack: the arrival is retried with backoff.
  # The deadline is the function timeout (Pub/Sub allows 600 s at most).
  ack_deadline_seconds       = var.converter.timeout_seconds
  message_retention_duration = "604800s"
  retain_acked_messages      = false

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = var.arrival_dead_letter_topic_id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  push_config {
    push_endpoint = google_cloudfunctions2_function.on_data_arrival.service_config[0].uri
    oidc_token {
      service_account_email = var.service_accounts.invoker
      audience              = google_cloudfunctions2_function.on_data_arrival.service_config[0].uri
    }
  }
}

# Dead-lettering: the Pub/Sub service agent acknowledges on the subscription it forwards
# from, so it is a subscriber of these two subscriptions and of nothing else (its
# publisher grants are on the dead-letter topics, infra/modules/pubsub).
locals {
  pubsub_service_agent = "serviceAccount:service-${var.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  dead_letter_sources = {
    training_requests = google_pubsub_subscription.training_requests.name
    arrivals          = google_pubsub_subscription.arrivals.name
  }
}

resource "google_pubsub_subscription_iam_member" "service_agent_subscriber" {
  for_each     = local.dead_letter_sources
  project      = var.project_id
  subscription = each.value
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

# --- grants on the resources above --------------------------------------------------------
# Every grant here is bound on the resource it is about, so it exists exactly when that
# resource does; the administrator's first apply creates both, and every later apply (by
# landfall-build) only reads them. A gen2 function runs as a Cloud Run service of the same
# name (service_config[0].service): that service is what a push request reaches.
locals {
  functions = {
    "on-data-arrival"     = google_cloudfunctions2_function.on_data_arrival
    "on-training-request" = google_cloudfunctions2_function.on_training_request
  }
}

# Pub/Sub pushes with an OIDC token of the invoker account: roles/run.invoker on each
# function's own service (run.routes.invoke is checked there), nothing project-wide.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.functions
  project  = var.project_id
  location = var.region
  name     = each.value.service_config[0].service
  role     = "roles/run.invoker"
  member   = "serviceAccount:${var.service_accounts.invoker}"
}

# landfall-build updates each function (source, build and service config) ...
resource "google_cloudfunctions2_function_iam_member" "build_deploys_function" {
  for_each       = local.functions
  project        = var.project_id
  location       = var.region
  cloud_function = each.value.name
  role           = var.deployer_roles.function
  member         = "serviceAccount:${var.service_accounts.build}"
}

# ... reads and keeps the invoker's binding on its service ...
resource "google_cloud_run_v2_service_iam_member" "build_manages_invoker" {
  for_each = local.functions
  project  = var.project_id
  location = var.region
  name     = each.value.service_config[0].service
  role     = var.deployer_roles.service
  member   = "serviceAccount:${var.service_accounts.build}"
}

# ... and updates the two push subscriptions (and their IAM: the Pub/Sub agent's grant).
resource "google_pubsub_subscription_iam_member" "build_deploys_subscription" {
  for_each     = local.dead_letter_sources # the two push subscriptions, both dead-lettered
  project      = var.project_id
  subscription = each.value
  role         = var.deployer_roles.subscription
  member       = "serviceAccount:${var.service_accounts.build}"
}
