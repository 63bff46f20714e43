# Forwarded under the same names by infra/envs/<env>/platform (read by ../functions and Cloud Build).

output "project_id" {
  description = "Project ID."
  value       = var.project_id
}

output "region" {
  description = "Region of everything regional."
  value       = var.region
}

output "bucket_name" {
  description = "Data bucket (LANDFALL_BUCKET)."
  value       = module.storage.bucket_name
}

output "sources_bucket_name" {
  description = "Bucket of the function source archives."
  value       = module.storage.sources_bucket_name
}

output "request_topic_id" {
  description = "Training-request topic, projects/P/topics/T (LANDFALL_REQUEST_TOPIC)."
  value       = module.pubsub.topic_id
}

output "dead_letter_topic_id" {
  description = "Dead-letter topic of the training-request subscription."
  value       = module.pubsub.dead_letter_topic_id
}

output "dead_letter_subscription" {
  description = "Subscription keeping dead-lettered training requests (LANDFALL_DEAD_LETTER_SUBSCRIPTION)."
  value       = module.pubsub.dead_letter_subscription_name
}

output "notification_topic_id" {
  description = "Topic of the data bucket's incoming/ notifications; on-data-arrival's push subscription reads it."
  value       = module.pubsub.notification_topic_id
}

output "arrival_dead_letter_topic_id" {
  description = "Dead-letter topic of the arrival (notification) subscription."
  value       = module.pubsub.arrival_dead_letter_topic_id
}

output "arrival_dead_letter_subscription" {
  description = "Subscription keeping dead-lettered arrivals (inspect and replay from it)."
  value       = module.pubsub.arrival_dead_letter_subscription_name
}

output "trainer_image_base" {
  description = "Trainer image path without tag; Cloud Build pushes :$SHORT_SHA here."
  value       = module.registry.image_base
}

output "converter_image_base" {
  description = "Converter image path without tag (the convert job's); Cloud Build pushes :$SHORT_SHA here."
  value       = module.registry.converter_image_base
}

output "cluster_name" {
  description = "GKE cluster name (gcloud container clusters get-credentials); null with the vertex engine."
  value       = one(module.gke[*].cluster_name)
}

output "cluster_location" {
  description = "GKE cluster location."
  value       = one(module.gke[*].cluster_location)
}

output "gke_endpoint" {
  description = "Cluster API private endpoint (LANDFALL_GKE_ENDPOINT), reached through functions_connector."
  value       = one(module.gke[*].private_endpoint)
}

output "functions_connector" {
  description = "VPC connector the submit function reaches the control plane through."
  value       = module.network.connector_id
}

output "gke_ca_certificate" {
  description = "Cluster CA certificate, base64 PEM (LANDFALL_GKE_CA_CERT)."
  value       = one(module.gke[*].ca_certificate)
  sensitive   = true
}

output "engine" {
  description = "Where jobs run: tfjob, jobset (the cluster) or vertex (Vertex AI custom jobs, no cluster)."
  value       = var.engine
}

output "reconcile_job_name" {
  description = "The Cloud Run job the schedule starts with the vertex engine (the functions root makes it)."
  value       = var.reconcile_job_name
}

output "service_accounts" {
  description = "Service account emails by workload."
  value       = module.iam.emails
}

output "deployer_roles" {
  description = "Custom roles bound on the functions root's resources: landfall-build's on each, the scheduler's on the reconcile job."
  value       = module.iam.deployer_roles
}

output "webhook_firewall_rule" {
  description = "The control-plane-to-nodes rule on 443/6443 (and 9443) the Kubeflow webhooks need."
  value       = module.network.webhook_firewall_name
}

output "project_number" {
  description = "Project number (the functions root names the Pub/Sub service agent with it)."
  value       = data.google_project.this.number
}

output "functions_repository" {
  description = "Artifact Registry repository of the functions' builds, projects/P/locations/L/repositories/R."
  value       = module.registry.functions_repository_name
}

output "monitoring_dashboard_id" {
  description = "ID of the Landfall dashboard (infra/modules/monitoring)."
  value       = module.monitoring.dashboard_id
}

output "scorer_image_base" {
  description = "Scorer image path without tag (the Cloud Run service landfall-scorer's); Cloud Build pushes :$SHORT_SHA here."
  value       = module.registry.scorer_image_base
}

output "detections_topic_name" {
  description = "Detections topic, short name (the scorer's LANDFALL_DETECTIONS_TOPIC)."
  value       = module.pubsub.detections_topic_name
}

output "detections_subscription" {
  description = "The operators' pull subscription on the detections topic."
  value       = module.pubsub.detections_subscription_name
}

output "score_requests_topic_id" {
  description = "Score-request topic (`landfall rescore`), projects/P/topics/T; the scorer's rescore push subscription reads it."
  value       = module.pubsub.score_requests_topic_id
}

output "scorer_dead_letter_topic_id" {
  description = "Dead-letter topic of the scorer's two push subscriptions."
  value       = module.pubsub.scorer_dead_letter_topic_id
}

output "scorer_dead_letter_subscription" {
  description = "Subscription keeping what the scorer dead-lettered (inspect and replay from it)."
  value       = module.pubsub.scorer_dead_letter_subscription_name
}
