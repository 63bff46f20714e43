output "cluster_name" {
  description = "Name of the GKE cluster."
  value       = google_container_cluster.this.name
}

output "cluster_location" {
  description = "Location (region) of the GKE cluster."
  value       = google_container_cluster.this.location
}

output "endpoint" {
  description = "Public endpoint of the control plane (nodes are private)."
  value       = google_container_cluster.this.endpoint
}

output "private_endpoint" {
  description = "Private endpoint of the control plane (reached from the VPC: the submit function's connector)."
  value       = google_container_cluster.this.private_cluster_config[0].private_endpoint
}

output "ca_certificate" {
  description = "Base64 PEM CA certificate of the cluster."
  value       = google_container_cluster.this.master_auth[0].cluster_ca_certificate
}

output "workload_pool" {
  description = "Workload Identity pool of the cluster."
  value       = google_container_cluster.this.workload_identity_config[0].workload_pool
}

output "gpu_node_pool" {
  description = "Name of the GPU node pool."
  value       = google_container_node_pool.gpu.name
}

output "gpu_flex_start_node_pool" {
  description = "Name of the flex-start (queued provisioning) GPU pool, or null when gpu_flex_start_pool is off."
  value       = one(google_container_node_pool.gpu_flex_start[*].name)
}

output "gpu_spot_node_pool" {
  description = "Name of the Spot GPU pool, or null when gpu_spot_pool is off."
  value       = one(google_container_node_pool.gpu_spot[*].name)
}
