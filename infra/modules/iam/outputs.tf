output "emails" {
  description = "Service account emails by workload (converter, convert-job, submitter, reconciler, trainer, invoker, gke-nodes, test, build, fn-build)."
  value       = { for k, sa in google_service_account.sa : k => sa.email }
}

output "project_number" {
  description = "Project number."
  value       = data.google_project.this.number
}
