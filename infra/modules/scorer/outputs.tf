output "uri" {
  description = "URI of the scorer service (internal ingress; Pub/Sub pushes to it)."
  value       = google_cloud_run_v2_service.scorer.uri
}

output "service" {
  description = "The scorer's Cloud Run service, projects/P/locations/L/services/S."
  value       = google_cloud_run_v2_service.scorer.id
}

output "subscriptions" {
  description = "The scorer's push subscriptions: arrivals (training requests) and rescore (score requests)."
  value = {
    arrivals = google_pubsub_subscription.arrivals.id
    rescore  = google_pubsub_subscription.rescore.id
  }
}

output "environment" {
  description = "Environment variables of the scorer service."
  value       = local.scorer_env
}
