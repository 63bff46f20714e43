locals {
  oauth_scopes = ["https://www.googleapis.com/auth/cloud-platform"]
}

resource "google_container_cluster" "this" {
  # checkov:skip=CKV_GCP_65:Google Groups for RBAC needs a Workspace domain; RBAC in k8s/base binds service-account users instead.
  # checkov:skip=CKV_GCP_12:Dataplane V2 (datapath_provider ADVANCED_DATAPATH) enforces NetworkPolicy itself; the legacy Calico network_policy block conflicts with it.
  provider = google

  project        = var.project_id
  name           = var.cluster_name
  location       = var.region
  node_locations = var.node_locations

  network         = var.network_id
  subnetwork      = var.subnetwork_id
  networking_mode = "VPC_NATIVE"

  # The default pool cannot carry our settings; node pools are managed below.
  remove_default_node_pool = true
  initial_node_count       = 1

  deletion_protection = var.deletion_protection
  resource_labels     = var.labels

  release_channel {
    channel = var.release_channel
  }

  ip_allocation_policy {
    cluster_secondary_range_name  = var.pods_range_name
    services_secondary_range_name = var.services_range_name
  }

  private_cluster_config {
    enable_private_nodes    = true
    enable_private_endpoint = false
    master_ipv4_cidr_block  = var.master_cidr
    master_global_access_config {
      enabled = true
    }
  }

  # Only listed networks reach the control plane, never Google Cloud's public ranges:
  #   - the submit function, through its VPC connector to the private endpoint
  #     (internal_authorized_cidrs: the connector's range);
  #   - operators and the deploy build's private pool egress, per environment
  #     (master_authorized_cidrs, see infra/README.md "Reaching the control plane").
  # IAM (container.clusterViewer) and the RBAC in k8s/ then decide what each may do.
  master_authorized_networks_config {
    gcp_public_cidrs_access_enabled = false
    dynamic "cidr_blocks" {
      for_each = concat(var.internal_authorized_cidrs, var.master_authorized_cidrs)
      content {
        cidr_block   = cidr_blocks.value.cidr_block
        display_name = cidr_blocks.value.display_name
      }
    }
  }

  workload_identity_config {
    workload_pool = "${var.project_id}.svc.id.goog"
  }

  # Dataplane V2 enforces NetworkPolicy.
  datapath_provider = "ADVANCED_DATAPATH"

  enable_shielded_nodes       = true
  enable_intranode_visibility = true
  enable_legacy_abac          = false

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  binary_authorization {
    evaluation_mode = "PROJECT_SINGLETON_POLICY_ENFORCE"
  }

  addons_config {
    gce_persistent_disk_csi_driver_config {
      enabled = true
    }
    http_load_balancing {
      disabled = false
    }
  }

  logging_config {
    enable_components = ["SYSTEM_COMPONENTS", "WORKLOADS"]
  }

  monitoring_config {
    enable_components = ["SYSTEM_COMPONENTS"]
    managed_prometheus {
      enabled = true
    }
  }

  node_config {
    service_account = var.node_service_account
    oauth_scopes    = local.oauth_scopes
    tags            = [var.node_tag]
    image_type      = "COS_CONTAINERD"
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }

  lifecycle {
    ignore_changes = [node_config]
  }
}

resource "google_container_node_pool" "system" {
  project  = var.project_id
  name     = "system"
  location = var.region
  cluster  = google_container_cluster.this.name

  autoscaling {
    min_node_count = 1
    max_node_count = var.system_max_nodes
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.system_machine_type
    image_type      = "COS_CONTAINERD"
    service_account = var.node_service_account
    oauth_scopes    = local.oauth_scopes
    tags            = [var.node_tag]
    labels          = merge(var.labels, { "landfall/pool" = "system" })

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }
}

# The training pool: scales from 0, GKE installs the NVIDIA driver, and GKE taints
# the nodes with nvidia.com/gpu=present:NoSchedule so only GPU pods (TFJob workers
# requesting nvidia.com/gpu) land there.
resource "google_container_node_pool" "gpu" {
  project  = var.project_id
  name     = "gpu-${replace(var.gpu_accelerator_type, "nvidia-", "")}"
  location = var.region
  cluster  = google_container_cluster.this.name

  initial_node_count = 0

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = var.gpu_max_nodes
    location_policy      = "ANY"
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.gpu_machine_type
    image_type      = "COS_CONTAINERD"
    spot            = var.gpu_spot
    service_account = var.node_service_account
    oauth_scopes    = local.oauth_scopes
    tags            = [var.node_tag]
    labels          = merge(var.labels, { "landfall/pool" = "gpu" })

    guest_accelerator {
      type  = var.gpu_accelerator_type
      count = var.gpu_accelerator_count
      gpu_driver_installation_config {
        gpu_driver_version = var.gpu_driver_version
      }
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }

  lifecycle {
    # The autoscaler owns the node count.
    ignore_changes = [initial_node_count]
  }
}

# Optional: GPUs that arrive whole (infra/README.md, "Optional GPU pools"; k8s/components/kueue-flex-start).
# Flex-start with queued provisioning (Dynamic Workload Scheduler): nodes are created only for a
# ProvisioningRequest (Kueue's provisioning admission check makes one per job), all of a job's nodes at
# once, and removed after it. GKE's settings for such a pool (the gcloud flags of
# https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest, read 2026-12-03; the rules
# tests/infra/gke_capacity.py checks): --enable-queued-provisioning, --flex-start, autoscaling from 0
# with location policy ANY, --reservation-affinity=none, --no-enable-autorepair. GKE taints its nodes
# cloud.google.com/gke-queued=true:NoSchedule and nvidia.com/gpu=present:NoSchedule; the Kueue
# flavor adds both tolerations to admitted pods.
resource "google_container_node_pool" "gpu_flex_start" {
  # checkov:skip=CKV_GCP_9:queued provisioning requires auto-repair off (GKE provisioningrequest how-to); a failed node ends its job's booking, Kueue and the engine retry.
  count = var.gpu_flex_start_pool ? 1 : 0

  project  = var.project_id
  name     = "gpu-${replace(var.gpu_accelerator_type, "nvidia-", "")}-flex"
  location = var.region
  cluster  = google_container_cluster.this.name

  initial_node_count = 0

  queued_provisioning {
    enabled = true
  }

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = var.gpu_flex_start_max_nodes
    location_policy      = "ANY"
  }

  management {
    auto_repair  = false
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.gpu_machine_type
    image_type      = "COS_CONTAINERD"
    flex_start      = true
    service_account = var.node_service_account
    oauth_scopes    = local.oauth_scopes
    tags            = [var.node_tag]
    labels          = merge(var.labels, { "landfall/pool" = "gpu-flex-start" })

    guest_accelerator {
      type  = var.gpu_accelerator_type
      count = var.gpu_accelerator_count
      gpu_driver_installation_config {
        gpu_driver_version = var.gpu_driver_version
      }
    }

    # Flex-start capacity is never drawn from a reservation.
    reservation_affinity {
      consume_reservation_type = "NO_RESERVATION"
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }

  lifecycle {
    ignore_changes = [initial_node_count]
  }
}

# Optional: cheap GPUs that can vanish (k8s/components/kueue-spot). Spot VMs, scaled from 0, tainted
# cloud.google.com/gke-spot=true:NoSchedule so that only pods admitted through the Spot queue (its
# Kueue flavor adds the toleration) land there; GKE labels Spot nodes cloud.google.com/gke-spot=true
# itself. A preempted node gives its pods about 30 s (GKE's graceful shutdown for Spot nodes); the
# engine then restarts the job's workers and the trainer resumes from its last checkpoint.
resource "google_container_node_pool" "gpu_spot" {
  count = var.gpu_spot_pool ? 1 : 0

  project  = var.project_id
  name     = "gpu-${replace(var.gpu_accelerator_type, "nvidia-", "")}-spot"
  location = var.region
  cluster  = google_container_cluster.this.name

  initial_node_count = 0

  autoscaling {
    total_min_node_count = 0
    total_max_node_count = var.gpu_spot_pool_max_nodes
    location_policy      = "ANY"
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.gpu_machine_type
    image_type      = "COS_CONTAINERD"
    spot            = true
    service_account = var.node_service_account
    oauth_scopes    = local.oauth_scopes
    tags            = [var.node_tag]
    labels          = merge(var.labels, { "landfall/pool" = "gpu-spot" })

    taint {
      key    = "cloud.google.com/gke-spot"
      value  = "true"
      effect = "NO_SCHEDULE"
    }

    guest_accelerator {
      type  = var.gpu_accelerator_type
      count = var.gpu_accelerator_count
      gpu_driver_installation_config {
        gpu_driver_version = var.gpu_driver_version
      }
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }

  lifecycle {
    ignore_changes = [initial_node_count]
  }
}
