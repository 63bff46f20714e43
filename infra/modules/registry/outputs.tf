output "repository_id" {
  description = "Repository ID."
  value       = google_artifact_registry_repository.trainer.repository_id
}

output "repository_name" {
  description = "Repository resource name."
  value       = google_artifact_registry_repository.trainer.name
}

output "image_base" {
  description = "Image path without tag: LOCATION-docker.pkg.dev/PROJECT/REPO/trainer."
  value       = "${var.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.trainer.repository_id}/trainer"
}

output "converter_image_base" {
  description = "Converter image path without tag (the Cloud Run job's): LOCATION-docker.pkg.dev/PROJECT/REPO/converter, in the trainer's repository."
  value       = "${var.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.trainer.repository_id}/converter"
}

output "functions_repository_id" {
  description = "Repository ID of the functions' build images."
  value       = google_artifact_registry_repository.functions.repository_id
}

output "functions_repository_name" {
  description = "Resource name (projects/P/locations/L/repositories/R) of the functions' repository: build_config.docker_repository."
  value       = google_artifact_registry_repository.functions.id
}

output "scorer_image_base" {
  description = "Scorer image path without tag (the Cloud Run service landfall-scorer's): LOCATION-docker.pkg.dev/PROJECT/REPO/scorer, in the trainer's repository."
  value       = "${var.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.trainer.repository_id}/scorer"
}
