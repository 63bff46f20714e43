output "metric_types" {
  description = "Metric types of the log-based metrics, by what they count."
  value = {
    rejections           = "${local.user_metric}/${google_logging_metric.rejections.name}"
    job_results          = "${local.user_metric}/${google_logging_metric.job_results.name}"
    arrival_to_start     = "${local.user_metric}/${google_logging_metric.arrival_to_start.name}"
    arrivals_converted   = "${local.user_metric}/${google_logging_metric.arrivals_converted.name}"
    reconciler_heartbeat = "${local.user_metric}/${google_logging_metric.reconciler_heartbeat.name}"
    anomalous_detections = "${local.user_metric}/${google_logging_metric.anomalous_detections.name}"
  }
}

output "dashboard_id" {
  description = "ID of the Landfall dashboard."
  value       = google_monitoring_dashboard.landfall.id
}

output "notification_channels" {
  description = "Notification channels the alerts notify."
  value       = local.channels
}
