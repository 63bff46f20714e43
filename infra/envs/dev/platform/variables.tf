variable "project_id" {
  description = "Google Cloud project ID to deploy Landfall into."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid Google Cloud project ID."
  }
}

variable "region" {
  description = "Region of the cluster, functions, bucket, topic and registry."
  type        = string
  default     = "us-central1"
  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]$", var.region))
    error_message = "region must be a Google Cloud region such as us-central1."
  }
}

variable "zones" {
  description = "Zones of the region for nodes; they must offer the GPU type."
  type        = list(string)
  default     = ["us-central1-a", "us-central1-b"]
  validation {
    condition     = length(var.zones) > 0
    error_message = "zones needs at least one zone."
  }
}

variable "bucket_name" {
  description = "Data bucket (incoming/, tfrecords/, runs/, rejected/); globally unique."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be a valid bucket name."
  }
}

variable "state_bucket" {
  description = "Existing bucket of the Terraform state (the same one given to -backend-config)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$", var.state_bucket))
    error_message = "state_bucket must be a valid bucket name."
  }
}

variable "gpu_accelerator_type" {
  description = "GPU of the training pool."
  type        = string
  default     = "nvidia-l4"
  validation {
    condition     = can(regex("^nvidia-[a-z0-9-]+$", var.gpu_accelerator_type))
    error_message = "gpu_accelerator_type must be an NVIDIA accelerator type such as nvidia-l4."
  }
}

variable "gpu_accelerator_count" {
  description = "GPUs per training node."
  type        = number
  default     = 1
  validation {
    condition     = contains([1, 2, 4, 8], var.gpu_accelerator_count)
    error_message = "gpu_accelerator_count must be 1, 2, 4 or 8."
  }
}

variable "gpu_machine_type" {
  description = "Machine type of the training pool (g2-standard-* carries L4 GPUs)."
  type        = string
  default     = "g2-standard-8"
}

variable "gpu_max_nodes" {
  description = "Maximum GPU nodes; the pool scales from 0."
  type        = number
  default     = 2
  validation {
    condition     = var.gpu_max_nodes >= 1
    error_message = "gpu_max_nodes must be at least 1."
  }
}

variable "gpu_spot" {
  description = "Use Spot VMs for the GPU pool."
  type        = bool
  default     = true
}

variable "gpu_flex_start_pool" {
  description = "Add a GPU pool for flex-start with queued provisioning (Dynamic Workload Scheduler); pair it with k8s/components/kueue-flex-start."
  type        = bool
  default     = false
}

variable "gpu_flex_start_max_nodes" {
  description = "Maximum nodes of the flex-start GPU pool; it scales from 0. The kueue-flex-start ClusterQueue's quota must fit in it."
  type        = number
  default     = 4
  validation {
    condition     = var.gpu_flex_start_max_nodes >= 1 && var.gpu_flex_start_max_nodes <= 100
    error_message = "gpu_flex_start_max_nodes must be between 1 and 100."
  }
}

variable "gpu_spot_pool" {
  description = "Add a separate Spot GPU pool, tainted cloud.google.com/gke-spot=true:NoSchedule; pair it with k8s/components/kueue-spot."
  type        = bool
  default     = false
}

variable "gpu_spot_pool_max_nodes" {
  description = "Maximum nodes of the Spot GPU pool; it scales from 0. The kueue-spot ClusterQueue's quota must fit in it."
  type        = number
  default     = 4
  validation {
    condition     = var.gpu_spot_pool_max_nodes >= 1 && var.gpu_spot_pool_max_nodes <= 100
    error_message = "gpu_spot_pool_max_nodes must be between 1 and 100."
  }
}

variable "master_cidr" {
  description = "Control plane /28 of the private cluster (source of the 443/6443 webhook firewall rule)."
  type        = string
  default     = "172.16.0.0/28"
  validation {
    condition     = can(cidrhost(var.master_cidr, 0)) && endswith(var.master_cidr, "/28")
    error_message = "master_cidr must be a /28."
  }
}

variable "master_authorized_cidrs" {
  description = "The only outside networks that reach the control plane in dev: operators' CIDRs (office, VPN) and the deploy build's private pool egress (infra/README.md). Empty: the control plane is reachable from the VPC only."
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  default = []
  validation {
    condition = alltrue([
      for c in var.master_authorized_cidrs : can(cidrhost(c.cidr_block, 0)) && tonumber(split("/", c.cidr_block)[1]) >= 16
    ])
    error_message = "Every entry needs a valid cidr_block of /16 or narrower: list specific networks, not the Internet."
  }
}

variable "connector_cidr" {
  description = "The /28 of the submit function's VPC connector (an authorized network of the control plane)."
  type        = string
  default     = "10.40.0.0/28"
  validation {
    condition     = can(cidrhost(var.connector_cidr, 0)) && endswith(var.connector_cidr, "/28")
    error_message = "connector_cidr must be a /28."
  }
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

variable "deletion_protection" {
  description = "Protect the cluster against destroy."
  type        = bool
  default     = false
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
  description = "Existing Cloud Monitoring notification channels (projects/P/notificationChannels/N) the alerts notify."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "notification_channels must be IDs of the form projects/P/notificationChannels/N."
  }
}

variable "notification_email" {
  description = "An email address the alerts notify (an email channel is made for it); empty for none."
  type        = string
  default     = ""
  validation {
    condition     = var.notification_email == "" || can(regex("^[^@[:space:]]+@[^@[:space:]]+$", var.notification_email))
    error_message = "notification_email must be an email address or empty."
  }
}

variable "expected_arrivals" {
  description = "Datasets that expect data regularly, with the hours (1-23) without a converted arrival before an alert fires."
  type        = map(number)
  default     = {}
}

variable "engine" {
  description = "Where jobs run (LANDFALL_ENGINE): jobset or tfjob on the GKE cluster this root makes, or vertex as Vertex AI custom jobs with no cluster (docs/deploying.md). The functions root reads it from this root's outputs."
  type        = string
  default     = "jobset"
  validation {
    condition     = contains(["tfjob", "jobset", "vertex"], var.engine)
    error_message = "engine must be tfjob, jobset or vertex."
  }
}
