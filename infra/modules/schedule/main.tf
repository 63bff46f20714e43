# The vertex engine's reconciler (docs/deploying.md, "Vertex AI: no cluster"): without a cluster there is no
# reconciler Deployment, so Cloud Scheduler starts the Cloud Run job landfall-reconcile (infra/modules/functions:
# `landfall reconcile --for-seconds 50`) every minute. Each execution releases waiting follow-ups and announces jobs
# that ended without a chief for most of its minute; the one that starts in an hour's first minute also applies the
# snapshots' collection rule (landfall.reconcile.loop). Two executions that overlap are harmless, as two reconciler
# replicas are (create-only records).
#
# The request is Cloud Run's own, as its documentation schedules a job
# (https://cloud.google.com/run/docs/execute/jobs-on-schedule, read 2026-12-05): POST the job's :run with an OAuth
# token of the scheduler account, which may run that job and nothing else (its grant is on the job, in
# infra/modules/functions). A missed or failed start is retried by the next minute's; none is retried here.

data "google_project" "this" {
  project_id = var.project_id
}

resource "google_cloud_scheduler_job" "reconcile" {
  project          = var.project_id
  region           = var.region
  name             = var.job_name
  description      = "Starts the Cloud Run job ${var.job_name} (the vertex engine's reconciler) every minute."
  schedule         = "* * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "30s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = "https://${var.region}-run.googleapis.com/apis/run.googleapis.com/v1/namespaces/${data.google_project.this.number}/jobs/${var.job_name}:run"

    oauth_token {
      service_account_email = var.service_account_email
      scope                 = "https://www.googleapis.com/auth/cloud-platform"
    }
  }
}
