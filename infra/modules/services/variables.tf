variable "project_id" {
  description = "Google Cloud project ID whose APIs are enabled."
  type        = string
}

variable "services" {
  description = "APIs Landfall uses."
  type        = list(string)
  default = [
    "aiplatform.googleapis.com", # the vertex engine's custom jobs
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com", # the vertex engine's reconcile schedule
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
    "vpcaccess.googleapis.com",
  ]
}
