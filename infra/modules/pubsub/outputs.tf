output "topic_id" {
  description = "Full ID (projects/P/topics/T) of the training-request topic."
  value       = google_pubsub_topic.requests.id
}

output "topic_name" {
  description = "Short name of the training-request topic."
  value       = google_pubsub_topic.requests.name
}

output "dead_letter_topic_id" {
  description = "Full ID of the dead-letter topic."
  value       = google_pubsub_topic.dead_letter.id
}

output "dead_letter_subscription_name" {
  description = "Short name of the subscription that keeps dead letters (LANDFALL_DEAD_LETTER_SUBSCRIPTION)."
  value       = google_pubsub_subscription.dead_letter.name
}

output "notification_topic_id" {
  description = "Full ID of the topic the data bucket's incoming/ notifications go to."
  value       = google_pubsub_topic.notifications.id
}

output "arrival_dead_letter_topic_id" {
  description = "Full ID of the dead-letter topic of the arrival (notification) subscription."
  value       = google_pubsub_topic.arrival_dead_letter.id
}

output "arrival_dead_letter_subscription_name" {
  description = "Short name of the subscription that keeps dead-lettered arrivals."
  value       = google_pubsub_subscription.arrival_dead_letter.name
}

output "notification_topic_name" {
  description = "Short name of the incoming/ notification topic."
  value       = google_pubsub_topic.notifications.name
}

output "results_topic_name" {
  description = "Short name of the training-results topic."
  value       = google_pubsub_topic.results.name
}
