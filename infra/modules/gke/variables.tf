variable "project_id" {
  description = "Google Cloud project ID that owns the cluster."
  type        = string
}

variable "region" {
  description = "Region of the (regional) cluster."
  type        = string
}

variable "node_locations" {
  description = "Zones of the region where nodes run; pick zones that offer the GPU type (L4: see `gcloud compute accelerator-types list`)."
  type        = list(string)
  validation {
    condition     = length(var.node_locations) > 0
    error_message = "node_locations needs at least one zone."
  }
}

variable "cluster_name" {
  description = "Name of the GKE cluster."
  type        = string
  default     = "landfall"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,38}[a-z0-9]$", var.cluster_name))
    error_message = "cluster_name must be 2-40 lowercase letters, digits and dashes."
  }
}

variable "network_id" {
  description = "VPC the cluster attaches to."
  type        = string
}

variable "subnetwork_id" {
  description = "Subnetwork of the nodes."
  type        = string
}

variable "pods_range_name" {
  description = "Secondary range name for pods."
  type        = string
}

variable "services_range_name" {
  description = "Secondary range name for services."
  type        = string
}

variable "master_cidr" {
  description = "The /28 of the private control plane (the same one the webhook firewall rule admits)."
  type        = string
}

variable "internal_authorized_cidrs" {
  description = "VPC ranges of our own that reach the private endpoint (the submit function's connector)."
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  default = []
  validation {
    condition     = alltrue([for c in var.internal_authorized_cidrs : can(cidrhost(c.cidr_block, 0))])
    error_message = "Every internal_authorized_cidrs entry needs a valid cidr_block."
  }
}

variable "master_authorized_cidrs" {
  description = "The only outside networks allowed to reach the control plane (operators' CIDRs, the deploy build's private pool egress); Google Cloud public ranges are never allowed."
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  default = []
  validation {
    condition     = alltrue([for c in var.master_authorized_cidrs : can(cidrhost(c.cidr_block, 0))])
    error_message = "Every master_authorized_cidrs entry needs a valid cidr_block."
  }
}

variable "node_tag" {
  description = "Network tag on every node (the webhook firewall rule targets it)."
  type        = string
}

variable "release_channel" {
  description = "GKE release channel."
  type        = string
  default     = "REGULAR"
  validation {
    condition     = contains(["RAPID", "REGULAR", "STABLE"], var.release_channel)
    error_message = "release_channel must be RAPID, REGULAR or STABLE."
  }
}

variable "node_service_account" {
  description = "Email of the least-privilege service account the nodes run as."
  type        = string
}

variable "system_machine_type" {
  description = "Machine type of the system pool (operators, kube-system)."
  type        = string
  default     = "e2-standard-4"
}

variable "system_max_nodes" {
  description = "Maximum nodes per zone in the system pool."
  type        = number
  default     = 2
  validation {
    condition     = var.system_max_nodes >= 1
    error_message = "system_max_nodes must be at least 1."
  }
}

variable "gpu_machine_type" {
  description = "Machine type of the GPU pool; must fit the accelerator (g2-standard-* for L4, n1-* for T4/V100, a2-* for A100)."
  type        = string
  default     = "g2-standard-8"
}

variable "gpu_accelerator_type" {
  description = "GPU accelerator type of the training pool."
  type        = string
  default     = "nvidia-l4"
  validation {
    condition     = can(regex("^nvidia-[a-z0-9-]+$", var.gpu_accelerator_type))
    error_message = "gpu_accelerator_type must be an NVIDIA accelerator type such as nvidia-l4."
  }
}

variable "gpu_accelerator_count" {
  description = "GPUs per node of the training pool."
  type        = number
  default     = 1
  validation {
    condition     = contains([1, 2, 4, 8], var.gpu_accelerator_count)
    error_message = "gpu_accelerator_count must be 1, 2, 4 or 8."
  }
}

variable "gpu_max_nodes" {
  description = "Upper bound of the GPU pool's autoscaler (total nodes); it scales from 0."
  type        = number
  default     = 4
  validation {
    condition     = var.gpu_max_nodes >= 1 && var.gpu_max_nodes <= 100
    error_message = "gpu_max_nodes must be between 1 and 100."
  }
}

variable "gpu_spot" {
  description = "Run the GPU pool on Spot VMs (cheaper, preemptible: TFJobs restart from checkpoints)."
  type        = bool
  default     = false
}

variable "gpu_flex_start_pool" {
  description = "Add a GPU pool for flex-start with queued provisioning (Dynamic Workload Scheduler): nodes only for Kueue's ProvisioningRequests, all of a job's nodes at once (k8s/components/kueue-flex-start)."
  type        = bool
  default     = false
}

variable "gpu_flex_start_max_nodes" {
  description = "Upper bound of the flex-start pool (total nodes); it scales from 0, one ProvisioningRequest at a time."
  type        = number
  default     = 4
  validation {
    condition     = var.gpu_flex_start_max_nodes >= 1 && var.gpu_flex_start_max_nodes <= 100
    error_message = "gpu_flex_start_max_nodes must be between 1 and 100."
  }
}

variable "gpu_spot_pool" {
  description = "Add a separate Spot GPU pool, tainted cloud.google.com/gke-spot=true:NoSchedule, used only by the Spot queue (k8s/components/kueue-spot)."
  type        = bool
  default     = false
}

variable "gpu_spot_pool_max_nodes" {
  description = "Upper bound of the Spot GPU pool (total nodes); it scales from 0."
  type        = number
  default     = 4
  validation {
    condition     = var.gpu_spot_pool_max_nodes >= 1 && var.gpu_spot_pool_max_nodes <= 100
    error_message = "gpu_spot_pool_max_nodes must be between 1 and 100."
  }
}

variable "gpu_driver_version" {
  description = "GPU driver GKE installs on the pool: DEFAULT or LATEST."
  type        = string
  default     = "DEFAULT"
  validation {
    condition     = contains(["DEFAULT", "LATEST"], var.gpu_driver_version)
    error_message = "gpu_driver_version must be DEFAULT or LATEST."
  }
}

variable "deletion_protection" {
  description = "Refuse `terraform destroy` of the cluster."
  type        = bool
  default     = true
}

variable "labels" {
  description = "Resource labels."
  type        = map(string)
  default     = {}
}
