variable "project_id" {
  description = "Google Cloud project ID that owns the buckets."
  type        = string
}

variable "location" {
  description = "Location of the buckets (a region close to the cluster)."
  type        = string
}

variable "bucket_name" {
  description = "Name of the data bucket (incoming/, tfrecords/, compacted/, snapshots/, runs/, rejected/, ...)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be a valid bucket name (3-63 lowercase characters)."
  }
}

variable "sources_bucket_name" {
  description = "Name of the bucket that holds the content-hashed Cloud Functions source archives."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$", var.sources_bucket_name))
    error_message = "sources_bucket_name must be a valid bucket name."
  }
}

variable "runs_coldline_days" {
  description = "Days after which training outputs under runs/ move to Coldline storage."
  type        = number
  default     = 30
  validation {
    condition     = var.runs_coldline_days >= 1
    error_message = "runs_coldline_days must be at least 1."
  }
}

variable "rejected_retention_days" {
  description = "Days after which rejection records under rejected/ are deleted."
  type        = number
  default     = 30
  validation {
    condition     = var.rejected_retention_days >= 1
    error_message = "rejected_retention_days must be at least 1."
  }
}

variable "noncurrent_versions_kept" {
  description = "Noncurrent object versions kept (versioning guards against overwrites)."
  type        = number
  default     = 3
  validation {
    condition     = var.noncurrent_versions_kept >= 1
    error_message = "noncurrent_versions_kept must be at least 1."
  }
}

variable "force_destroy" {
  description = "Allow `terraform destroy` to delete non-empty buckets (dev only)."
  type        = bool
  default     = false
}

variable "labels" {
  description = "Resource labels."
  type        = map(string)
  default     = {}
}
