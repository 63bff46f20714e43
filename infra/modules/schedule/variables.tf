variable "project_id" {
  description = "Google Cloud project ID."
  type        = string
}

variable "region" {
  description = "Region of the reconcile job and of this schedule."
  type        = string
}

variable "job_name" {
  description = "The Cloud Run job the schedule starts (landfall-reconcile, made by the functions root)."
  type        = string
}

variable "service_account_email" {
  description = "The scheduler account: its OAuth token starts the job (run.jobs.run, bound on the job)."
  type        = string
}
