variable "project_id" {
  description = "Google Cloud project ID that owns the repository."
  type        = string
}

variable "location" {
  description = "Region of the Artifact Registry repository."
  type        = string
}

variable "repository_id" {
  description = "Docker repository holding the trainer image."
  type        = string
  default     = "landfall"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,62}$", var.repository_id))
    error_message = "repository_id must be lowercase letters, digits and dashes."
  }
}

variable "functions_repository_id" {
  description = "Docker repository of the functions' build images (the function-build account pushes here only)."
  type        = string
  default     = "landfall-functions"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,62}$", var.functions_repository_id))
    error_message = "functions_repository_id must be lowercase letters, digits and dashes."
  }
}

variable "keep_recent" {
  description = "Number of most recent trainer image versions kept by the cleanup policy."
  type        = number
  default     = 20
  validation {
    condition     = var.keep_recent >= 1
    error_message = "keep_recent must be at least 1."
  }
}

variable "labels" {
  description = "Resource labels."
  type        = map(string)
  default     = {}
}
