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

variable "docker_repository" {
  description = "Artifact Registry repository (projects/P/locations/L/repositories/R) the function builds push to: the functions' own, not gcf-artifacts."
  type        = string
  validation {
    condition     = can(regex("^projects/[^/]+/locations/[^/]+/repositories/[^/]+$", var.docker_repository))
    error_message = "docker_repository must look like projects/P/locations/L/repositories/R."
  }
}

variable "region" {
  description = "Region of the functions."
  type        = string
}

variable "source_dir" {
  description = "Folder zipped as the functions' source: the repository's functions/ (main.py, requirements.txt, landfall/)."
  type        = string
}

variable "sources_bucket_name" {
  description = "Bucket receiving the content-hashed source archive."
  type        = string
}

variable "bucket_name" {
  description = "Data bucket (the submitter's LANDFALL_BUCKET)."
  type        = string
}

variable "request_topic_id" {
  description = "Full ID (projects/P/topics/T) of the training-request topic."
  type        = string
  validation {
    condition     = can(regex("^projects/[^/]+/topics/[^/]+$", var.request_topic_id))
    error_message = "request_topic_id must look like projects/P/topics/T."
  }
}

variable "dead_letter_topic_id" {
  description = "Full ID of the dead-letter topic of the training-request subscription."
  type        = string
}

variable "notification_topic_id" {
  description = "Full ID (projects/P/topics/T) of the topic the data bucket's incoming/ notifications go to."
  type        = string
  validation {
    condition     = can(regex("^projects/[^/]+/topics/[^/]+$", var.notification_topic_id))
    error_message = "notification_topic_id must look like projects/P/topics/T."
  }
}

variable "arrival_dead_letter_topic_id" {
  description = "Full ID of the dead-letter topic of the arrival (notification) subscription."
  type        = string
}

variable "dead_letter_subscription" {
  description = "Subscription on the dead-letter topic that `landfall status` peeks (LANDFALL_DEAD_LETTER_SUBSCRIPTION)."
  type        = string
  default     = "landfall-training-requests-dead-letter"
}

variable "max_delivery_attempts" {
  description = "Deliveries of a training request, or of an arrival notification, before it is dead-lettered."
  type        = number
  default     = 5
  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts 5 to 100 delivery attempts."
  }
}

variable "vpc_connector" {
  description = "Serverless VPC Access connector (projects/P/locations/R/connectors/C) through which on-training-request reaches the control plane's private endpoint."
  type        = string
  validation {
    condition     = can(regex("^projects/[^/]+/locations/[^/]+/connectors/[^/]+$", var.vpc_connector))
    error_message = "vpc_connector must look like projects/P/locations/R/connectors/C."
  }
}

variable "gke_endpoint" {
  description = "Cluster API endpoint (LANDFALL_GKE_ENDPOINT); null with the vertex engine (no cluster)."
  type        = string
}

variable "gke_ca_certificate" {
  description = "Base64 PEM CA certificate of the cluster (LANDFALL_GKE_CA_CERT); null with the vertex engine."
  type        = string
}

variable "namespace" {
  description = "Kubernetes namespace of the TFJobs (LANDFALL_NAMESPACE)."
  type        = string
  default     = "landfall-training"
}

variable "trainer_image" {
  description = "Full trainer image reference the TFJobs run (LANDFALL_TRAINER_IMAGE)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/.+[:@].+$", var.trainer_image))
    error_message = "trainer_image must be a registry path with a tag or digest."
  }
}

variable "engine" {
  description = "What a released job is (LANDFALL_ENGINE): jobset (JobSet controller, what a new deploy gets: docs/submit.md; the overlays' k8s/components/jobset gives the reconciler the same), tfjob (Kubeflow training operator; then remove that component from the overlay) or vertex (a Vertex AI custom job; no cluster, and the reconcile job here stands in for the reconciler: docs/deploying.md)."
  type        = string
  default     = "jobset"
  validation {
    condition     = contains(["tfjob", "jobset", "vertex"], var.engine)
    error_message = "engine must be tfjob, jobset or vertex."
  }
}

variable "trainer_service_account" {
  description = "Kubernetes ServiceAccount of the TFJob pods (LANDFALL_TRAINER_SERVICE_ACCOUNT)."
  type        = string
  default     = "landfall-trainer"
}

variable "service_accounts" {
  description = "Emails of the converter, submitter, invoker, fn-build, convert-job, build, reconciler and scheduler accounts (infra/modules/iam output)."
  type = object({
    converter   = string
    submitter   = string
    invoker     = string
    fn-build    = string
    convert-job = string
    build       = string
    reconciler  = string
    scheduler   = string
  })
}

variable "deployer_roles" {
  description = "Custom roles (infra/modules/iam output deployer_roles) the build account holds on this module's resources: function, service, job, subscription."
  type = object({
    function     = string
    service      = string
    job          = string
    subscription = string
    job_runner   = string
  })
}

variable "reconcile_job_name" {
  description = "The vertex engine's reconcile job (Cloud Run; the platform's schedule starts it every minute)."
  type        = string
  default     = "landfall-reconcile"
}

variable "converter_image" {
  description = "Full converter image reference the Cloud Run job runs (python -m landfall.arrival.task)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/.+[:@].+$", var.converter_image))
    error_message = "converter_image must be a registry path with a tag or digest."
  }
}

variable "convert_job" {
  description = "The Cloud Run job converting large arrivals: its name (the deployer's grant in infra/modules/iam names it), sizing of each task, retries, and parallelism (also the function's LANDFALL_MAX_TASKS)."
  type = object({
    name            = string
    memory          = string
    cpu             = string
    timeout_seconds = number
    max_retries     = number
    parallelism     = number
  })
  default = {
    name            = "landfall-convert"
    memory          = "2Gi"
    cpu             = "1"
    timeout_seconds = 3600
    max_retries     = 3
    parallelism     = 32
  }
  validation {
    condition     = var.convert_job.timeout_seconds <= 86400 && var.convert_job.max_retries >= 1 && var.convert_job.parallelism >= 1
    error_message = "A task runs at most 24 h; at least one retry (temporary failures exit 75); parallelism >= 1."
  }
  validation {
    condition     = can(regex("^[0-9]+(Gi|Mi)$", var.convert_job.memory))
    error_message = "memory in Gi or Mi (e.g. 2Gi): it is also the tasks' LANDFALL_MEMORY_LIMIT_MIB."
  }
}

variable "converter" {
  description = "Sizing of on-data-arrival (decodes uploads and writes TFRecord shards: memory-bound)."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "2Gi"
    cpu             = "1"
    timeout_seconds = 540
    max_instances   = 10
    concurrency     = 1
  }
  validation {
    condition     = var.converter.timeout_seconds <= 540 && var.converter.max_instances >= 1
    error_message = "The timeout is also the arrival subscription's ack deadline: at most 540 s (Pub/Sub allows 600); max_instances must be >= 1."
  }
  validation {
    condition     = can(regex("^[0-9]+(Gi|Mi)$", var.converter.memory))
    error_message = "memory in Gi or Mi (e.g. 2Gi): it is also the function's LANDFALL_MEMORY_LIMIT_MIB."
  }
}

variable "submitter" {
  description = "Sizing of on-training-request (reads a manifest, creates one TFJob: small and short)."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "512Mi"
    cpu             = "1"
    timeout_seconds = 120
    max_instances   = 5
    concurrency     = 1
  }
  validation {
    condition     = var.submitter.timeout_seconds <= 540 && var.submitter.max_instances >= 1
    error_message = "Functions time out at 540 s at most; max_instances must be >= 1."
  }
}

variable "labels" {
  description = "Resource labels."
  type        = map(string)
  default     = {}
}
