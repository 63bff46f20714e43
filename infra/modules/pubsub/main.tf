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
# dead-letter topic and acknowledge on the source subscription. The source
# subscription is created with the function (infra/modules/functions); the
# subscriber grant is project-wide because the deployer of that root may not
# set IAM policies, and it is held by Google's own service agent only.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

resource "google_project_iam_member" "service_agent_subscriber" {
  project = var.project_id
  role    = "roles/pubsub.subscriber"
  member  = local.pubsub_service_agent
}
