output "source_object" {
  description = "Content-hashed source archive deployed."
  value       = module.functions.source_object
}

output "trainer_image" {
  description = "Trainer image the submitter puts in TFJobs."
  value       = module.functions.trainer_image
}

output "training_subscription" {
  description = "Push subscription feeding on-training-request."
  value       = module.functions.training_subscription
}

output "arrival_subscription" {
  description = "Push subscription feeding on-data-arrival (the data bucket's incoming/ notifications)."
  value       = module.functions.arrival_subscription
}

output "bucket_name" {
  description = "Data bucket (LANDFALL_BUCKET); Cloud Build writes it into k8s/base/project.env for the reconciler."
  value       = local.platform.bucket_name
}

output "scorer_uri" {
  description = "URI of the scorer service (internal ingress; Pub/Sub pushes to it)."
  value       = module.scorer.uri
}

output "scorer_subscriptions" {
  description = "The scorer's push subscriptions (training requests, score requests)."
  value       = module.scorer.subscriptions
}

output "engine" {
  description = "Where jobs run, as the platform was applied: the deploy applies cluster manifests unless it is vertex."
  value       = local.platform.engine
}
