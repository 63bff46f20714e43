variable "project_id" {
  description = "Google Cloud project ID (the platform's)."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid Google Cloud project ID."
  }
}

variable "region" {
  description = "Region of the functions (the platform's region)."
  type        = string
  default     = "us-central1"
}

variable "state_bucket" {
  description = "Bucket of the Terraform state; the platform outputs are read from it."
  type        = string
}

variable "trainer_image_tag" {
  description = "Tag of the trainer image the TFJobs run; Cloud Build passes $SHORT_SHA."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.trainer_image_tag))
    error_message = "trainer_image_tag must be a valid Docker tag."
  }
}

variable "converter_image_tag" {
  description = "Tag of the converter image the Cloud Run job landfall-convert runs; Cloud Build passes $SHORT_SHA."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.converter_image_tag))
    error_message = "converter_image_tag must be a valid Docker tag."
  }
}

variable "functions_source_dir" {
  description = "The functions/ folder, relative to this root."
  type        = string
  default     = "../../../../functions"
}

variable "scorer_image_tag" {
  description = "Tag of the scorer image the Cloud Run service landfall-scorer runs; Cloud Build passes $SHORT_SHA."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.scorer_image_tag))
    error_message = "scorer_image_tag must be a valid Docker tag."
  }
}

variable "scorer_max_instances" {
  description = "Most scorer instances at once (bounds the cost of a burst of arrivals; each loads the champion once)."
  type        = number
  default     = 4
  validation {
    condition     = var.scorer_max_instances >= 1 && floor(var.scorer_max_instances) == var.scorer_max_instances
    error_message = "scorer_max_instances must be a whole number >= 1."
  }
}
