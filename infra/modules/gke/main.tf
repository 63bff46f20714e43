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
