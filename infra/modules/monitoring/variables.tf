variable "project_id" {
  description = "Project the metrics, alert policies and dashboard live in (the one Landfall logs to)."
  type        = string
}

variable "env" {
  description = "Environment name, shown in the alert and dashboard titles."
  type        = string
}

variable "notification_channels" {
  description = "IDs of existing notification channels (projects/P/notificationChannels/N) every alert notifies."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "notification_channels must be IDs of the form projects/P/notificationChannels/N."
  }
}

variable "notification_email" {
  description = "An email address to notify as well (an email notification channel is made for it); empty for none."
  type        = string
  default     = ""
  validation {
    condition     = var.notification_email == "" || can(regex("^[^@[:space:]]+@[^@[:space:]]+$", var.notification_email))
    error_message = "notification_email must be an email address or empty."
  }
}

variable "dead_letter_subscriptions" {
  description = "Short names of the subscriptions that hold dead letters (training requests, arrivals, the scorer's)."
  type        = list(string)
}

variable "function_names" {
  description = "Names of the Cloud Run services whose error rate is watched: the two Cloud Functions (2nd gen) and the scorer (a temporary failure answers 5xx, so Pub/Sub redelivers)."
  type        = list(string)
  default     = ["on-data-arrival", "on-training-request", "landfall-scorer"]
}

variable "function_error_ratio" {
  description = "Share of a function's requests answered 5xx over 10 minutes above which the error-rate alert fires."
  type        = number
  default     = 0.1
  validation {
    condition     = var.function_error_ratio > 0 && var.function_error_ratio < 1
    error_message = "function_error_ratio must be between 0 and 1."
  }
}

variable "heartbeat_absent_seconds" {
  description = "How long without a reconciler heartbeat log line before the alert fires (the loop logs one a minute)."
  type        = number
  default     = 600
  validation {
    condition     = var.heartbeat_absent_seconds >= 180 && var.heartbeat_absent_seconds % 60 == 0
    error_message = "heartbeat_absent_seconds must be a whole number of minutes, at least 180."
  }
}

variable "expected_arrivals" {
  description = "Per dataset that expects data regularly: hours without a converted arrival before an alert fires. Empty: no such alert."
  type        = map(number)
  default     = {}
  validation {
    condition     = alltrue([for d, h in var.expected_arrivals : can(regex("^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", d)) && h >= 1 && h <= 23 && floor(h) == h])
    error_message = "expected_arrivals maps dataset names to a whole number of hours between 1 and 23."
  }
}

variable "engine" {
  description = "Where jobs run (the platform's engine): the reconciler's heartbeat comes from its Deployment (tfjob, jobset) or from the scheduled reconcile job (vertex)."
  type        = string
  default     = "jobset"
  validation {
    condition     = contains(["tfjob", "jobset", "vertex"], var.engine)
    error_message = "engine must be tfjob, jobset or vertex."
  }
}
