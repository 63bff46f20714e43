# Detections on arrival: the Cloud Run service landfall-scorer and the two push subscriptions that
# feed it. Every committed arrival's training request (landfall-training-requests, quarantined
# arrivals included: the scorer gets its own copy) and every score request (landfall-score-requests,
# `landfall rescore`) is pushed to it; it scores the arrival's source file with the dataset's champion
# (landfall.detect.handler), writes scores/<dataset>/<arrival>/<champion job>/ create-only and
# publishes one landfall.detection/v1 on landfall-detections. The topics and the accounts come with
# the platform (infra/modules/pubsub, infra/modules/iam); this module is applied with the functions
# root, by an administrator first and then by landfall-build on every deploy.

# The scorer's configuration, and TensorFlow's: the SavedModel was written by tf-keras.
locals {
  scorer_env = {
    GOOGLE_CLOUD_PROJECT      = var.project_id
    LANDFALL_BUCKET           = var.bucket_name
    LANDFALL_DETECTIONS_TOPIC = var.detections_topic_name
    TF_USE_LEGACY_KERAS       = "1"
  }
}

# functions-framework serving the CloudEvent function on_score_request (scorer/main.py) from the
# scorer image (scorer/Dockerfile, pushed by Cloud Build as scorer:$SHORT_SHA). Pub/Sub pushes the
# raw envelope; the framework turns it into the messagePublished CloudEvent.
resource "google_cloud_run_v2_service" "scorer" {
  project              = var.project_id
  name                 = var.name
  location             = var.region
  description          = "Scores every committed arrival with its dataset's champion and publishes the detections."
  labels               = var.labels
  ingress              = "INGRESS_TRAFFIC_INTERNAL_ONLY" # Pub/Sub push of this project is internal traffic
  invoker_iam_disabled = false                           # every request needs run.invoker: scorer-invoker's only
  deletion_protection  = false

  template {
    labels          = var.labels
    service_account = var.service_accounts.scorer
    # Scoring one arrival: read the source file, load the champion once per instance, score, write.
    timeout = "${var.timeout_seconds}s"
    # Each instance holds TensorFlow and one champion in memory and scores up to this many arrivals at once.
    max_instance_request_concurrency = var.concurrency

    # The cost of a burst is bounded here: at most max_instances instances (each loading the champion
    # once and scoring many arrivals, concurrency at a time); the rest wait in Pub/Sub and are
    # redelivered with backoff. None while nothing arrives (min 0).
    scaling {
      min_instance_count = 0
      max_instance_count = var.max_instances
    }

    containers {
      image = var.scorer_image
      resources {
        limits = {
          cpu    = var.cpu
          memory = var.memory
        }
      }
      dynamic "env" {
        for_each = local.scorer_env
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }
}

# Pub/Sub pushes with an OIDC token of scorer-invoker: roles/run.invoker on this service only.
resource "google_cloud_run_v2_service_iam_member" "scorer_invoker" {
  project  = var.project_id
  location = google_cloud_run_v2_service.scorer.location
  name     = google_cloud_run_v2_service.scorer.name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${var.service_accounts.scorer-invoker}"
}

# landfall-build updates the service and keeps the invoker's binding, bound on the service itself
# (Cloud Run ignores resource names in IAM Conditions); no create, delete or invoke.
resource "google_cloud_run_v2_service_iam_member" "build_deploys_scorer" {
  project  = var.project_id
  location = google_cloud_run_v2_service.scorer.location
  name     = google_cloud_run_v2_service.scorer.name
  role     = var.deployer_roles.scorer_service
  member   = "serviceAccount:${var.service_accounts.build}"
}

# Every committed arrival's training request, the scorer's own copy (the submitter has its own
# subscription on the same topic). A non-2xx answer or a timeout is a nack: retried with backoff,
# dead-lettered after max_delivery_attempts. Results are create-only, so a redelivery while an
# earlier attempt still runs (the request timeout is longer than the ack deadline) writes nothing twice.
resource "google_pubsub_subscription" "arrivals" {
  project = var.project_id
  name    = "landfall-scorer-arrivals"
  topic   = var.request_topic_id
  labels  = var.labels

  ack_deadline_seconds       = var.ack_deadline_seconds
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
    push_endpoint = google_cloud_run_v2_service.scorer.uri
    oidc_token {
      service_account_email = var.service_accounts.scorer-invoker
      audience              = google_cloud_run_v2_service.scorer.uri
    }
  }
}

# landfall.score_request/v1 (`landfall rescore`): one arrival scored again by the current champion.
resource "google_pubsub_subscription" "rescore" {
  project = var.project_id
  name    = "landfall-scorer-rescore"
  topic   = var.score_requests_topic_id
  labels  = var.labels

  ack_deadline_seconds       = var.ack_deadline_seconds
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
    push_endpoint = google_cloud_run_v2_service.scorer.uri
    oidc_token {
      service_account_email = var.service_accounts.scorer-invoker
      audience              = google_cloud_run_v2_service.scorer.uri
    }
  }
}

# Dead-lettering: the Pub/Sub service agent acknowledges on the subscription it forwards from, so it
# is a subscriber of these two (its publisher grant is on the dead-letter topic, infra/modules/pubsub).
locals {
  pubsub_service_agent = "serviceAccount:service-${var.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  dead_letter_sources = {
    scorer_arrivals = google_pubsub_subscription.arrivals.name
    scorer_rescore  = google_pubsub_subscription.rescore.name
  }
}

resource "google_pubsub_subscription_iam_member" "service_agent_scorer_subscriber" {
  for_each     = local.dead_letter_sources
  project      = var.project_id
  subscription = each.value
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

# landfall-build updates the two push subscriptions (and their IAM: the Pub/Sub agent's grant).
resource "google_pubsub_subscription_iam_member" "build_deploys_scorer_subscription" {
  for_each     = local.dead_letter_sources # the two push subscriptions, both dead-lettered
  project      = var.project_id
  subscription = each.value
  role         = var.deployer_roles.subscription
  member       = "serviceAccount:${var.service_accounts.build}"
}
