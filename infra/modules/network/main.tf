resource "google_compute_network" "vpc" {
  project                 = var.project_id
  name                    = "${var.name}-vpc"
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
}

resource "google_compute_subnetwork" "nodes" {
  project                  = var.project_id
  name                     = "${var.name}-nodes"
  region                   = var.region
  network                  = google_compute_network.vpc.id
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true

  secondary_ip_range {
    range_name    = "pods"
    ip_cidr_range = var.pods_cidr
  }

  secondary_ip_range {
    range_name    = "services"
    ip_cidr_range = var.services_cidr
  }

  log_config {
    aggregation_interval = "INTERVAL_5_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# Private nodes have no external IPs: Cloud NAT lets them pull public images
# (the Kubeflow training operator, NVIDIA components) while nothing can reach them.
resource "google_compute_router" "router" {
  project = var.project_id
  name    = "${var.name}-router"
  region  = var.region
  network = google_compute_network.vpc.id
}

resource "google_compute_router_nat" "nat" {
  project                            = var.project_id
  name                               = "${var.name}-nat"
  router                             = google_compute_router.router.name
  region                             = var.region
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES"

  log_config {
    enable = true
    filter = "ERRORS_ONLY"
  }
}

# The pitfall from the cluster set-up guide: on a private cluster the control plane
# can only reach the nodes on 443 and 10250 by default, so admission webhooks served
# from pods (the Kubeflow install, the training operator) time out and the install
# crashes. This opens the webhook ports from the control plane's /28 only.
resource "google_compute_firewall" "master_to_webhooks" {
  project     = var.project_id
  name        = "${var.name}-master-to-webhooks"
  network     = google_compute_network.vpc.id
  description = "GKE control plane to nodes on the admission webhook ports (443, 6443, 9443)."
  direction   = "INGRESS"
  priority    = 1000

  source_ranges = [var.master_cidr]
  target_tags   = [var.node_tag]

  allow {
    protocol = "tcp"
    ports    = var.webhook_ports
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

# on-training-request reaches the control plane's private endpoint through this
# connector (egress to private ranges only); its range is an authorized network of
# the cluster (infra/modules/gke), so no Google Cloud public range needs to be.
resource "google_vpc_access_connector" "functions" {
  project       = var.project_id
  name          = "${var.name}-fn"
  region        = var.region
  network       = google_compute_network.vpc.name
  ip_cidr_range = var.connector_cidr
  min_instances = 2
  max_instances = 3
}
