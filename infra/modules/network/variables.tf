variable "project_id" {
  description = "Google Cloud project ID that owns the network."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid Google Cloud project ID."
  }
}

variable "region" {
  description = "Region of the subnetwork, router and NAT."
  type        = string
}

variable "name" {
  description = "Name prefix for the VPC, subnetwork, router and NAT."
  type        = string
  default     = "landfall"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,40}$", var.name))
    error_message = "name must be lowercase letters, digits and dashes."
  }
}

variable "subnet_cidr" {
  description = "Primary range of the subnetwork (node IPs)."
  type        = string
  default     = "10.10.0.0/20"
  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0))
    error_message = "subnet_cidr must be a CIDR block."
  }
}

variable "pods_cidr" {
  description = "Secondary range for GKE pods."
  type        = string
  default     = "10.20.0.0/16"
  validation {
    condition     = can(cidrhost(var.pods_cidr, 0))
    error_message = "pods_cidr must be a CIDR block."
  }
}

variable "services_cidr" {
  description = "Secondary range for GKE services."
  type        = string
  default     = "10.30.0.0/20"
  validation {
    condition     = can(cidrhost(var.services_cidr, 0))
    error_message = "services_cidr must be a CIDR block."
  }
}

variable "connector_cidr" {
  description = "The /28 of the Serverless VPC Access connector the submit function reaches the control plane through."
  type        = string
  default     = "10.40.0.0/28"
  validation {
    condition     = can(cidrhost(var.connector_cidr, 0)) && endswith(var.connector_cidr, "/28")
    error_message = "connector_cidr must be a /28."
  }
}

variable "master_cidr" {
  description = "The /28 of the private cluster's control plane; the source of the webhook firewall rule."
  type        = string
  default     = "172.16.0.0/28"
  validation {
    condition     = can(cidrhost(var.master_cidr, 0)) && endswith(var.master_cidr, "/28")
    error_message = "master_cidr must be a /28 CIDR block."
  }
}

variable "webhook_ports" {
  description = "TCP ports the control plane must reach on the nodes: 443 and 6443 (admission webhooks, per the Kubeflow install), 9443 (training-operator v1.9 webhook server)."
  type        = list(string)
  default     = ["443", "6443", "9443"]
  validation {
    condition     = alltrue([for p in var.webhook_ports : can(regex("^[0-9]{1,5}$", p))]) && contains(var.webhook_ports, "443") && contains(var.webhook_ports, "6443")
    error_message = "webhook_ports must be port numbers and include 443 and 6443."
  }
}

variable "node_tag" {
  description = "Network tag carried by every GKE node; the firewall rule targets it."
  type        = string
  default     = "landfall-gke-node"
}
