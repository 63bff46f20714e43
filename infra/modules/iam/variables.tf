variable "project_id" {
  description = "Google Cloud project ID."
  type        = string
}

variable "region" {
  description = "Region of the functions (Cloud Run services) the invoker may call."
  type        = string
}

variable "bucket_name" {
  description = "Data bucket; grants are limited to its prefixes with IAM Conditions."
  type        = string
}

variable "sources_bucket_name" {
  description = "Bucket of the function source archives."
  type        = string
}

variable "state_bucket" {
  description = "Bucket of the Terraform state (the gcs backend); the build account applies the functions root with it."
  type        = string
}

variable "results_topic_name" {
  description = "Training-results topic: the trainer and the reconciler accounts publish to it."
  type        = string
  default     = "landfall-training-results"
}

variable "detections_topic_name" {
  description = "Detections topic (landfall.detection/v1): the scorer account publishes to it, nobody else."
  type        = string
  default     = "landfall-detections"
}

variable "topic_name" {
  description = "Training-request topic the converter publishes to."
  type        = string
}

variable "repository_name" {
  description = "Artifact Registry repository resource name (projects/P/locations/L/repositories/R)."
  type        = string
}

variable "functions_repository_name" {
  description = "Artifact Registry repository ID of the functions' builds (the function-build account's only push target)."
  type        = string
}

variable "repository_location" {
  description = "Location of the Artifact Registry repository."
  type        = string
}

variable "workload_pool" {
  description = "Workload Identity pool of the cluster (PROJECT.svc.id.goog); null with the vertex engine (no cluster)."
  type        = string
  default     = null
}

variable "engine" {
  description = "Where jobs run (LANDFALL_ENGINE): tfjob or jobset on the cluster, vertex as Vertex AI custom jobs (no cluster)."
  type        = string
  default     = "jobset"
  validation {
    condition     = contains(["tfjob", "jobset", "vertex"], var.engine)
    error_message = "engine must be tfjob, jobset or vertex."
  }
}

variable "training_namespace" {
  description = "Kubernetes namespace of the TFJobs."
  type        = string
  default     = "landfall-training"
}

variable "trainer_ksa" {
  description = "Kubernetes ServiceAccount of the TFJob worker pods."
  type        = string
  default     = "landfall-trainer"
}

variable "reconciler_ksa" {
  description = "Kubernetes ServiceAccount of the landfall-reconciler Deployment (acts as the reconciler account)."
  type        = string
  default     = "landfall-reconciler"
}
