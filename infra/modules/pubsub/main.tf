locals {
  pubsub_service_agent = "serviceAccount:service-${var.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_pubsub_topic" "requests" {
  # checkov:skip=CKV_GCP_83:Requests carry object paths only, no data; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

# Every finished training job's one result (landfall.result/v1: dataset, job, status,
# verdict, losses, model and champion URIs). Published by the trainer's chief and by the
# reconciler (for a job that ended without a chief to do so); the publishers are granted
# on this topic only, in infra/modules/iam. Consumers attach their own subscriptions.
resource "google_pubsub_topic" "results" {
  # checkov:skip=CKV_GCP_83:Results carry job names, losses and URIs only, no data; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.results_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

resource "google_pubsub_topic" "dead_letter" {
  # checkov:skip=CKV_GCP_83:Dead-lettered requests carry object paths only; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.dead_letter_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

# A topic without a subscription drops what it receives: this one keeps dead
# letters for inspection and replay. It has the topic's name, which is what
# landfall's JobConfig.dead_letter_subscription expects by default.
resource "google_pubsub_subscription" "dead_letter" {
  project                    = var.project_id
  name                       = var.dead_letter_topic_name
  topic                      = google_pubsub_topic.dead_letter.id
  labels                     = var.labels
  message_retention_duration = "604800s"
  ack_deadline_seconds       = 60
  expiration_policy {
    ttl = ""
  }
}

# Dead-lettering is done by the Pub/Sub service agent: it must publish to the
# dead-letter topics (granted here, on each of those topics only) and acknowledge on
# the source subscriptions. Its subscriber grant is on those two subscriptions
# only (training requests and arrivals), next to them in infra/modules/functions;
# it holds nothing project-wide.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

# --- arrivals: Cloud Storage notifications ---------------------------------------
# Only objects under incoming/ start work: the bucket publishes a notification for
# each object finalized, deleted or archived under that prefix (the converter retracts
# an arrival whose object went away) to this topic, and on-data-arrival's push
# subscription (infra/modules/functions) reads it. What the system writes itself
# (tfrecords/, tmp/, rejected/, runs/) publishes nothing and starts no function.

data "google_storage_project_service_account" "gcs" {
  project = var.project_id
}

resource "google_pubsub_topic" "notifications" {
  # checkov:skip=CKV_GCP_83:Notifications carry object metadata only, no data; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.notification_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

resource "google_pubsub_topic" "arrival_dead_letter" {
  # checkov:skip=CKV_GCP_83:Dead-lettered notifications carry object metadata only; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.arrival_dead_letter_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

# Keeps the arrivals on-data-arrival failed on max_delivery_attempts times, for
# inspection and replay (same name as its topic, like the request dead letters').
resource "google_pubsub_subscription" "arrival_dead_letter" {
  project                    = var.project_id
  name                       = var.arrival_dead_letter_topic_name
  topic                      = google_pubsub_topic.arrival_dead_letter.id
  labels                     = var.labels
  message_retention_duration = "604800s"
  ack_deadline_seconds       = 60
  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic_iam_member" "arrival_dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.arrival_dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

# The Cloud Storage service agent publishes the notifications: on this topic only.
resource "google_pubsub_topic_iam_member" "gcs_agent_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.notifications.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}

resource "google_storage_notification" "arrivals" {
  bucket             = var.bucket_name
  topic              = google_pubsub_topic.notifications.id
  payload_format     = "JSON_API_V1"
  object_name_prefix = "incoming/" # landfall.core.contracts.layout.Layout.incoming_prefix
  event_types        = ["OBJECT_FINALIZE", "OBJECT_DELETE", "OBJECT_ARCHIVE"]

  # Cloud Storage checks that its service agent may publish when the notification is created.
  depends_on = [google_pubsub_topic_iam_member.gcs_agent_publisher]
}

# --- detections on arrival (the scorer, infra/modules/scorer) ------------------------------------
# landfall.detection/v1, one message per scored arrival (landfall.core.artifacts.detections), published by the
# scorer's account only (infra/modules/iam). Consumers attach their own subscriptions; the pull
# subscription of the same name is the operators' (`landfall status`).
resource "google_pubsub_topic" "detections" {
  # checkov:skip=CKV_GCP_83:Detections carry names, counts, time ranges and URIs, no data; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.detections_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

resource "google_pubsub_subscription" "detections" {
  project                    = var.project_id
  name                       = var.detections_topic_name
  topic                      = google_pubsub_topic.detections.id
  labels                     = var.labels
  message_retention_duration = "604800s"
  ack_deadline_seconds       = 60
  expiration_policy {
    ttl = ""
  }
}

# landfall.score_request/v1 (`landfall rescore`): score one arrival again with the current champion.
# Published by operators with their own credentials, as `landfall republish` publishes training
# requests: no workload account may publish here. The scorer's push subscription reads it.
resource "google_pubsub_topic" "score_requests" {
  # checkov:skip=CKV_GCP_83:Score requests carry an arrival's manifest path only, no data; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.score_requests_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

# What the scorer failed on max_delivery_attempts times, from either of its push subscriptions.
resource "google_pubsub_topic" "scorer_dead_letter" {
  # checkov:skip=CKV_GCP_83:Dead-lettered training and score requests carry object paths only; Google-managed encryption is enough.
  project                    = var.project_id
  name                       = var.scorer_dead_letter_topic_name
  labels                     = var.labels
  message_retention_duration = var.message_retention
}

# Keeps them for inspection and replay (same name as its topic, like the other dead letters').
resource "google_pubsub_subscription" "scorer_dead_letter" {
  project                    = var.project_id
  name                       = var.scorer_dead_letter_topic_name
  topic                      = google_pubsub_topic.scorer_dead_letter.id
  labels                     = var.labels
  message_retention_duration = "604800s"
  ack_deadline_seconds       = 60
  expiration_policy {
    ttl = ""
  }
}

# The Pub/Sub service agent dead-letters: publisher on this topic only (its subscriber grants are on
# the scorer's two push subscriptions, next to them in infra/modules/scorer).
resource "google_pubsub_topic_iam_member" "scorer_dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.scorer_dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}
