output "test_trigger_id" {
  description = "ID of the test trigger (null without var.github)."
  value       = one(google_cloudbuild_trigger.test[*].trigger_id)
}

output "deploy_trigger_id" {
  description = "ID of the deploy trigger (null without var.github)."
  value       = one(google_cloudbuild_trigger.deploy[*].trigger_id)
}
