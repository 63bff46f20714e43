output "emails" {
  description = "Service account emails by workload (converter, convert-job, submitter, reconciler, trainer, invoker, gke-nodes, test, build, fn-build, scorer, scorer-invoker, scheduler)."
  value       = { for k, sa in google_service_account.sa : k => sa.email }
}

output "project_number" {
  description = "Project number."
  value       = data.google_project.this.number
}

output "deployer_roles" {
  description = "The custom roles bound on resources of the functions root (in infra/modules/functions): landfall-build's on each resource, and the scheduler's on the reconcile job (job_runner, vertex engine)."
  value = {
    function     = google_project_iam_custom_role.function_deployer.name
    service      = google_project_iam_custom_role.service_iam.name
    job          = google_project_iam_custom_role.job_deployer.name
    subscription = google_project_iam_custom_role.subscription_deployer.name
    # the scorer's Cloud Run service (infra/modules/scorer)
    scorer_service = google_project_iam_custom_role.service_deployer.name
    # the scheduler account's on the reconcile job (vertex engine)
    job_runner = google_project_iam_custom_role.job_runner.name
  }
}
