variable "project_id" {
  description = "Google Cloud project ID."
  type        = string
}

variable "env" {
  description = "Environment name (dev, prod): the trigger names and the deploy's _ENV."
  type        = string
}

variable "region" {
  description = "Region of the deployment (the deploy's _REGION)."
  type        = string
}

variable "state_bucket" {
  description = "Bucket of the Terraform state (the deploy's _STATE_BUCKET)."
  type        = string
}

variable "trainer_repository_id" {
  description = "Artifact Registry repository of the trainer image (the deploy's _AR_REPO)."
  type        = string
}

variable "test_service_account" {
  description = "Email of landfall-test, the test trigger's account."
  type        = string
}

variable "deploy_service_account" {
  description = "Email of landfall-build, the deploy trigger's account."
  type        = string
}

variable "github" {
  description = "Repository connected to Cloud Build (GitHub app) and the branch that deploys; null: no triggers."
  type = object({
    owner  = string
    name   = string
    branch = string
  })
  default = null
  validation {
    condition     = var.github == null || can(regex("^[A-Za-z0-9._/-]+$", var.github.branch))
    error_message = "github.branch must be a branch name."
  }
}
