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

output "detections_topic_id" {
  description = "Full ID of the detections topic (landfall.detection/v1)."
  value       = google_pubsub_topic.detections.id
}

output "detections_topic_name" {
  description = "Short name of the detections topic (the scorer's LANDFALL_DETECTIONS_TOPIC)."
  value       = google_pubsub_topic.detections.name
}

output "detections_subscription_name" {
  description = "Short name of the operators' pull subscription on the detections topic."
  value       = google_pubsub_subscription.detections.name
}

output "score_requests_topic_id" {
  description = "Full ID of the score-request topic (`landfall rescore`)."
  value       = google_pubsub_topic.score_requests.id
}

output "scorer_dead_letter_topic_id" {
  description = "Full ID of the dead-letter topic of the scorer's push subscriptions."
  value       = google_pubsub_topic.scorer_dead_letter.id
}

output "scorer_dead_letter_subscription_name" {
  description = "Short name of the subscription that keeps what the scorer dead-lettered."
  value       = google_pubsub_subscription.scorer_dead_letter.name
}
