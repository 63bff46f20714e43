output "enabled" {
  description = "APIs enabled (use as a dependency)."
  value       = [for s in google_project_service.this : s.service]
}
