output "emails" {
  description = "Service account emails by workload (converter, convert-job, submitter, reconciler, trainer, invoker, gke-nodes, test, build, fn-build, scorer, scorer-invoker)."
  value       = { for k, sa in google_service_account.sa : k => sa.email }
}

output "project_number" {
  description = "Project number."
  value       = data.google_project.this.number
}

output "deployer_roles" {
  description = "The custom roles landfall-build holds on each resource of the functions root (bound there, in infra/modules/functions)."
  value = {
    function     = google_project_iam_custom_role.function_deployer.name
    service      = google_project_iam_custom_role.service_iam.name
    job          = google_project_iam_custom_role.job_deployer.name
    subscription = google_project_iam_custom_role.subscription_deployer.name
    # the scorer's Cloud Run service (infra/modules/scorer)
    scorer_service = google_project_iam_custom_role.service_deployer.name
  }
}
