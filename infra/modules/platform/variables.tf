# No defaults: each environment root (infra/envs/<env>/platform) declares the variables a
# user sets, with that environment's defaults and the validation, and passes them all here.

variable "env" {
  description = "Environment name (dev, prod): names the network and cluster landfall-<env> and labels everything."
  type        = string
}

variable "force_destroy" {
  description = "Let terraform destroy the buckets with their objects (dev only)."
  type        = bool
}

variable "project_id" {
  description = "Google Cloud project ID to deploy Landfall into."
  type        = string
}

variable "region" {
  description = "Region of the cluster, functions, bucket, topic and registry."
  type        = string
}

variable "zones" {
  description = "Zones of the region for nodes; they must offer the GPU type."
  type        = list(string)
}

variable "bucket_name" {
  description = "Data bucket (incoming/, tfrecords/, runs/, rejected/); globally unique. The sources bucket is <bucket_name>-sources."
  type        = string
}

variable "state_bucket" {
  description = "Existing bucket of the Terraform state (the same one given to -backend-config)."
  type        = string
}

variable "gpu_accelerator_type" {
  description = "GPU of the training pool."
  type        = string
}

variable "gpu_accelerator_count" {
  description = "GPUs per training node."
  type        = number
}

variable "gpu_machine_type" {
  description = "Machine type of the training pool (g2-standard-* carries L4 GPUs)."
  type        = string
}

variable "gpu_max_nodes" {
  description = "Maximum GPU nodes; the pool scales from 0."
  type        = number
}

variable "gpu_spot" {
  description = "Use Spot VMs for the GPU pool."
  type        = bool
}

variable "gpu_flex_start_pool" {
  description = "Add the flex-start (queued provisioning) GPU pool (infra/modules/gke; k8s/components/kueue-flex-start)."
  type        = bool
  default     = false
}

variable "gpu_flex_start_max_nodes" {
  description = "Maximum nodes of the flex-start GPU pool; it scales from 0."
  type        = number
  default     = 4
}

variable "gpu_spot_pool" {
  description = "Add the separate, tainted Spot GPU pool (infra/modules/gke; k8s/components/kueue-spot)."
  type        = bool
  default     = false
}

variable "gpu_spot_pool_max_nodes" {
  description = "Maximum nodes of the Spot GPU pool; it scales from 0."
  type        = number
  default     = 4
}

variable "master_cidr" {
  description = "Control plane /28 of the private cluster (source of the 443/6443 webhook firewall rule)."
  type        = string
}

variable "connector_cidr" {
  description = "The /28 of the submit function's VPC connector (an authorized network of the control plane)."
  type        = string
}

variable "master_authorized_cidrs" {
  description = "The only outside networks allowed to the control plane: operators' CIDRs and the deploy build's private pool egress."
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
}

variable "release_channel" {
  description = "GKE release channel."
  type        = string
}

variable "deletion_protection" {
  description = "Protect the cluster against destroy."
  type        = bool
}

variable "github" {
  description = "GitHub repository connected to Cloud Build and the branch that deploys (the test and deploy triggers, infra/modules/triggers); null: no triggers."
  type = object({
    owner  = string
    name   = string
    branch = string
  })
  default = null
}

variable "notification_channels" {
  description = "Existing notification channel IDs the alerts notify (infra/modules/monitoring)."
  type        = list(string)
}

variable "notification_email" {
  description = "An email address the alerts notify as well; empty for none."
  type        = string
}

variable "expected_arrivals" {
  description = "Per dataset: hours without a converted arrival before an alert fires."
  type        = map(number)
}

variable "engine" {
  description = "Where jobs run (LANDFALL_ENGINE): jobset or tfjob on the GKE cluster this root makes, or vertex as Vertex AI custom jobs, with no cluster (docs/deploying.md). The functions root reads it from this root's outputs."
  type        = string
  default     = "jobset"
  validation {
    condition     = contains(["tfjob", "jobset", "vertex"], var.engine)
    error_message = "engine must be tfjob, jobset or vertex."
  }
}

variable "reconcile_job_name" {
  description = "The Cloud Run job that reconciles with the vertex engine (made by the functions root; the schedule starts it)."
  type        = string
  default     = "landfall-reconcile"
}
