output "schedule_id" {
  description = "The Cloud Scheduler job that starts the reconcile job every minute."
  value       = google_cloud_scheduler_job.reconcile.id
}
