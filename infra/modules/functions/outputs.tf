output "source_object" {
  description = "Content-hashed object name of the deployed source archive."
  value       = google_storage_bucket_object.source.name
}

output "on_data_arrival_uri" {
  description = "URI of the on-data-arrival service (internal ingress; Pub/Sub pushes to it)."
  value       = google_cloudfunctions2_function.on_data_arrival.service_config[0].uri
}

output "on_training_request_uri" {
  description = "URI of the on-training-request service (internal ingress; Pub/Sub pushes to it)."
  value       = google_cloudfunctions2_function.on_training_request.service_config[0].uri
}

output "training_subscription" {
  description = "The push subscription that triggers on-training-request."
  value       = google_pubsub_subscription.training_requests.id
}

output "arrival_subscription" {
  description = "The push subscription that triggers on-data-arrival (the data bucket's incoming/ notifications)."
  value       = google_pubsub_subscription.arrivals.id
}

output "trainer_image" {
  description = "Trainer image the submitter puts in TFJobs (LANDFALL_TRAINER_IMAGE)."
  value       = var.trainer_image
}

output "convert_job" {
  description = "The Cloud Run job converting large arrivals (projects/P/locations/L/jobs/J: the function's LANDFALL_CONVERT_JOB)."
  value       = google_cloud_run_v2_job.convert.id
}

output "environment" {
  description = "Environment variables of each function, by function name (the submitter's holds the cluster CA)."
  value = {
    on-data-arrival     = local.converter_env
    on-training-request = local.submitter_env
    landfall-convert    = local.convert_job_env
  }
  sensitive = true
}
