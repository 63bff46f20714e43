variable "project_id" {
  description = "Google Cloud project ID."
  type        = string
}

variable "project_number" {
  description = "Project number (names the Pub/Sub service agent, subscriber of the two push subscriptions for dead-lettering)."
  type        = string
  validation {
    condition     = can(regex("^[0-9]+$", var.project_number))
    error_message = "project_number must be digits."
  }
}

variable "region" {
  description = "Region of the scorer service."
  type        = string
}

variable "name" {
  description = "Name of the Cloud Run service (the monitoring module watches it by this name)."
  type        = string
  default     = "landfall-scorer"
}

variable "bucket_name" {
  description = "Data bucket (the scorer's LANDFALL_BUCKET)."
  type        = string
}

variable "detections_topic_name" {
  description = "Short name of the topic the scorer publishes landfall.detection/v1 to (LANDFALL_DETECTIONS_TOPIC)."
  type        = string
  default     = "landfall-detections"
}

variable "request_topic_id" {
  description = "Full ID (projects/P/topics/T) of the training-request topic: every committed arrival's request."
  type        = string
  validation {
    condition     = can(regex("^projects/[^/]+/topics/[^/]+$", var.request_topic_id))
    error_message = "request_topic_id must look like projects/P/topics/T."
  }
}

variable "score_requests_topic_id" {
  description = "Full ID (projects/P/topics/T) of the score-request topic (`landfall rescore`)."
  type        = string
  validation {
    condition     = can(regex("^projects/[^/]+/topics/[^/]+$", var.score_requests_topic_id))
    error_message = "score_requests_topic_id must look like projects/P/topics/T."
  }
}

variable "dead_letter_topic_id" {
  description = "Full ID of the dead-letter topic of both push subscriptions (landfall-scorer-dead-letter)."
  type        = string
}

variable "scorer_image" {
  description = "Full scorer image reference (scorer/Dockerfile: functions-framework serving on_score_request)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/.+[:@].+$", var.scorer_image))
    error_message = "scorer_image must be a registry path with a tag or digest."
  }
}

variable "service_accounts" {
  description = "Emails of the scorer (runtime), scorer-invoker (push identity) and build accounts (infra/modules/iam output)."
  type = object({
    scorer         = string
    scorer-invoker = string
    build          = string
  })
}

variable "deployer_roles" {
  description = "Custom roles (infra/modules/iam output deployer_roles) the build account holds on this module's resources: scorer_service, subscription."
  type = object({
    scorer_service = string
    subscription   = string
  })
}

variable "max_instances" {
  description = "Most scorer instances at once: bounds the cost of a burst of arrivals (each instance loads the champion once and scores many arrivals); the rest wait in Pub/Sub."
  type        = number
  default     = 4
  validation {
    condition     = var.max_instances >= 1 && floor(var.max_instances) == var.max_instances
    error_message = "max_instances must be a whole number >= 1."
  }
}

variable "concurrency" {
  description = "Arrivals one instance scores at once (max_instance_request_concurrency)."
  type        = number
  default     = 4
  validation {
    condition     = var.concurrency >= 1 && var.concurrency <= 1000
    error_message = "Cloud Run allows 1 to 1000 concurrent requests per instance."
  }
}

variable "cpu" {
  description = "vCPUs of each instance (TensorFlow on CPU)."
  type        = string
  default     = "2"
}

variable "memory" {
  description = "Memory of each instance: TensorFlow, one champion and the arrivals being scored."
  type        = string
  default     = "4Gi"
  validation {
    condition     = can(regex("^[0-9]+(Gi|Mi)$", var.memory))
    error_message = "memory in Gi or Mi (e.g. 4Gi)."
  }
}

variable "timeout_seconds" {
  description = "Request timeout of the service: the longest one arrival's scoring may take."
  type        = number
  default     = 900
  validation {
    condition     = var.timeout_seconds >= 1 && var.timeout_seconds <= 3600
    error_message = "Cloud Run services time out at 3600 s at most."
  }
}

variable "ack_deadline_seconds" {
  description = "Ack deadline of both push subscriptions (Pub/Sub allows 600 s at most); a longer scoring is redelivered, and its create-only results make that harmless."
  type        = number
  default     = 600
  validation {
    condition     = var.ack_deadline_seconds >= 10 && var.ack_deadline_seconds <= 600
    error_message = "Pub/Sub ack deadlines are 10 to 600 s."
  }
}

variable "max_delivery_attempts" {
  description = "Deliveries of a request to the scorer before it is dead-lettered."
  type        = number
  default     = 5
  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts 5 to 100 delivery attempts."
  }
}

variable "labels" {
  description = "Resource labels."
  type        = map(string)
  default     = {}
}
