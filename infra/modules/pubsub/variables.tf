variable "project_id" {
  description = "Google Cloud project ID that owns the topics."
  type        = string
}

variable "project_number" {
  description = "Project number (names the Pub/Sub service agent)."
  type        = string
  validation {
    condition     = can(regex("^[0-9]+$", var.project_number))
    error_message = "project_number must be digits."
  }
}

variable "topic_name" {
  description = "Topic the converter publishes training requests to."
  type        = string
  default     = "landfall-training-requests"
}

variable "results_topic_name" {
  description = "Topic every finished training job's result (landfall.result/v1) is published to."
  type        = string
  default     = "landfall-training-results"
}

variable "dead_letter_topic_name" {
  description = "Topic that receives requests the submitter failed on max_delivery_attempts times."
  type        = string
  default     = "landfall-training-requests-dead-letter"
}

variable "bucket_name" {
  description = "Data bucket whose incoming/ objects are notified to the notifications topic."
  type        = string
}

variable "notification_topic_name" {
  description = "Topic the data bucket publishes its incoming/ notifications (JSON_API_V1) to; on-data-arrival's push subscription reads it."
  type        = string
  default     = "landfall-gcs-notifications"
}

variable "arrival_dead_letter_topic_name" {
  description = "Topic that receives notifications on-data-arrival failed on max_delivery_attempts times."
  type        = string
  default     = "landfall-gcs-notifications-dead-letter"
}

variable "detections_topic_name" {
  description = "Topic the scorer publishes one landfall.detection/v1 per scored arrival to (also the name of the operators' pull subscription)."
  type        = string
  default     = "landfall-detections"
}

variable "score_requests_topic_name" {
  description = "Topic `landfall rescore` publishes landfall.score_request/v1 to; the scorer's push subscription reads it."
  type        = string
  default     = "landfall-score-requests"
}

variable "scorer_dead_letter_topic_name" {
  description = "Topic that receives what the scorer failed on max_delivery_attempts times (both its push subscriptions)."
  type        = string
  default     = "landfall-scorer-dead-letter"
}

variable "message_retention" {
  description = "How long topics keep messages (lets a fixed subscriber seek back), e.g. 604800s."
  type        = string
  default     = "604800s"
  validation {
    condition     = can(regex("^[0-9]+s$", var.message_retention))
    error_message = "message_retention must be a duration in seconds such as 604800s."
  }
}

variable "labels" {
  description = "Resource labels."
  type        = map(string)
  default     = {}
}
