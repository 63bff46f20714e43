output "network_id" {
  description = "ID of the VPC."
  value       = google_compute_network.vpc.id
}

output "network_name" {
  description = "Name of the VPC."
  value       = google_compute_network.vpc.name
}

output "subnetwork_id" {
  description = "ID of the node subnetwork."
  value       = google_compute_subnetwork.nodes.id
}

output "pods_range_name" {
  description = "Name of the pods secondary range."
  value       = "pods"
}

output "services_range_name" {
  description = "Name of the services secondary range."
  value       = "services"
}

output "master_cidr" {
  description = "The control plane /28 that the webhook firewall rule admits."
  value       = var.master_cidr
}

output "node_tag" {
  description = "Network tag the nodes must carry for the webhook firewall rule to apply."
  value       = var.node_tag
}

output "webhook_firewall_name" {
  description = "Name of the control-plane-to-nodes webhook firewall rule."
  value       = google_compute_firewall.master_to_webhooks.name
}

output "connector_id" {
  description = "Serverless VPC Access connector of the submit function (projects/P/locations/R/connectors/C)."
  value       = google_vpc_access_connector.functions.id
}

output "connector_cidr" {
  description = "Range of the connector; an authorized network of the control plane."
  value       = google_vpc_access_connector.functions.ip_cidr_range
}
