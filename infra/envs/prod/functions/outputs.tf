output "source_object" {
  description = "Content-hashed source archive deployed."
  value       = module.functions.source_object
}

output "trainer_image" {
  description = "Trainer image the submitter puts in TFJobs."
  value       = module.functions.trainer_image
}

output "training_subscription" {
  description = "Push subscription feeding on-training-request."
  value       = module.functions.training_subscription
}
