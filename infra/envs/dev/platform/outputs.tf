# The outputs of modules/platform, under the names ../functions (terraform_remote_state)
# and Cloud Build read.

output "project_id" {
  description = "Project ID."
  value       = module.platform.project_id
}

output "region" {
  description = "Region of everything regional."
  value       = module.platform.region
}

output "bucket_name" {
  description = "Data bucket (LANDFALL_BUCKET)."
  value       = module.platform.bucket_name
}

output "sources_bucket_name" {
  description = "Bucket of the function source archives."
  value       = module.platform.sources_bucket_name
}

output "request_topic_id" {
  description = "Training-request topic, projects/P/topics/T (LANDFALL_REQUEST_TOPIC)."
  value       = module.platform.request_topic_id
}

output "dead_letter_topic_id" {
  description = "Dead-letter topic of the training-request subscription."
  value       = module.platform.dead_letter_topic_id
}

output "dead_letter_subscription" {
  description = "Subscription keeping dead-lettered training requests (LANDFALL_DEAD_LETTER_SUBSCRIPTION)."
  value       = module.platform.dead_letter_subscription
}

output "notification_topic_id" {
  description = "Topic of the data bucket's incoming/ notifications; on-data-arrival's push subscription reads it."
  value       = module.platform.notification_topic_id
}

output "arrival_dead_letter_topic_id" {
  description = "Dead-letter topic of the arrival (notification) subscription."
  value       = module.platform.arrival_dead_letter_topic_id
}

output "arrival_dead_letter_subscription" {
  description = "Subscription keeping dead-lettered arrivals (inspect and replay from it)."
  value       = module.platform.arrival_dead_letter_subscription
}

output "trainer_image_base" {
  description = "Trainer image path without tag; Cloud Build pushes :$SHORT_SHA here."
  value       = module.platform.trainer_image_base
}

output "converter_image_base" {
  description = "Converter image path without tag (the convert job's); Cloud Build pushes :$SHORT_SHA here."
  value       = module.platform.converter_image_base
}

output "cluster_name" {
  description = "GKE cluster name (gcloud container clusters get-credentials)."
  value       = module.platform.cluster_name
}

output "cluster_location" {
  description = "GKE cluster location."
  value       = module.platform.cluster_location
}

output "gke_endpoint" {
  description = "Cluster API private endpoint (LANDFALL_GKE_ENDPOINT), reached through functions_connector."
  value       = module.platform.gke_endpoint
}

output "gke_ca_certificate" {
  description = "Cluster CA certificate, base64 PEM (LANDFALL_GKE_CA_CERT)."
  value       = module.platform.gke_ca_certificate
  sensitive   = true
}

output "engine" {
  description = "Where jobs run: tfjob, jobset (the cluster) or vertex (Vertex AI custom jobs, no cluster)."
  value       = module.platform.engine
}

output "reconcile_job_name" {
  description = "The Cloud Run job the schedule starts with the vertex engine (the functions root makes it)."
  value       = module.platform.reconcile_job_name
}

output "service_accounts" {
  description = "Service account emails by workload."
  value       = module.platform.service_accounts
}

output "deployer_roles" {
  description = "Custom roles landfall-build holds on the functions root's resources (the functions root binds them)."
  value       = module.platform.deployer_roles
}

output "webhook_firewall_rule" {
  description = "The control-plane-to-nodes rule on 443/6443 (and 9443) the Kubeflow webhooks need."
  value       = module.platform.webhook_firewall_rule
}

output "project_number" {
  description = "Project number (the functions root names the Pub/Sub service agent with it)."
  value       = module.platform.project_number
}

output "functions_repository" {
  description = "Artifact Registry repository of the functions' builds, projects/P/locations/L/repositories/R."
  value       = module.platform.functions_repository
}

output "functions_connector" {
  description = "VPC connector the submit function reaches the control plane's private endpoint through."
  value       = module.platform.functions_connector
}

output "monitoring_dashboard_id" {
  description = "ID of the Landfall dashboard (infra/modules/monitoring)."
  value       = module.platform.monitoring_dashboard_id
}

output "scorer_image_base" {
  description = "Scorer image path without tag (the Cloud Run service landfall-scorer's); Cloud Build pushes :$SHORT_SHA here."
  value       = module.platform.scorer_image_base
}

output "detections_topic_name" {
  description = "Detections topic, short name (the scorer's LANDFALL_DETECTIONS_TOPIC)."
  value       = module.platform.detections_topic_name
}

output "detections_subscription" {
  description = "The operators' pull subscription on the detections topic."
  value       = module.platform.detections_subscription
}

output "score_requests_topic_id" {
  description = "Score-request topic (`landfall rescore`), projects/P/topics/T; the scorer's rescore push subscription reads it."
  value       = module.platform.score_requests_topic_id
}

output "scorer_dead_letter_topic_id" {
  description = "Dead-letter topic of the scorer's two push subscriptions."
  value       = module.platform.scorer_dead_letter_topic_id
}

output "scorer_dead_letter_subscription" {
  description = "Subscription keeping what the scorer dead-lettered (inspect and replay from it)."
  value       = module.platform.scorer_dead_letter_subscription
}
