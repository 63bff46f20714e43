# The part of the environment Cloud Build applies on every build: the two
# functions and the push subscriptions that trigger them, the convert job, and the
# scorer service with its push subscriptions.

data "terraform_remote_state" "platform" {
  backend = "gcs"
  config = {
    bucket = var.state_bucket
    prefix = "landfall/prod/platform"
  }
}

locals {
  platform = data.terraform_remote_state.platform.outputs
  labels   = { app = "landfall", env = "prod", managed-by = "terraform" }
}

module "functions" {
  source     = "../../../modules/functions"
  project_id = var.project_id
  region     = var.region
  # Added to the platform outputs with the functions' repository: apply the platform first.
  project_number       = local.platform.project_number
  docker_repository    = local.platform.functions_repository
  vpc_connector        = local.platform.functions_connector
  source_dir           = var.functions_source_dir
  sources_bucket_name  = local.platform.sources_bucket_name
  bucket_name          = local.platform.bucket_name
  request_topic_id     = local.platform.request_topic_id
  dead_letter_topic_id = local.platform.dead_letter_topic_id
  # Added to the platform outputs with the reconciler: apply the platform first.
  dead_letter_subscription = local.platform.dead_letter_subscription
  # Added to the platform outputs with the incoming/ notification: apply the platform first.
  notification_topic_id        = local.platform.notification_topic_id
  arrival_dead_letter_topic_id = local.platform.arrival_dead_letter_topic_id
  # Where jobs run, as the platform was applied (vertex: no cluster, a scheduled reconcile job).
  engine             = local.platform.engine
  reconcile_job_name = local.platform.reconcile_job_name
  gke_endpoint       = local.platform.gke_endpoint
  gke_ca_certificate = local.platform.gke_ca_certificate
  trainer_image      = "${local.platform.trainer_image_base}:${var.trainer_image_tag}"
  # Added to the platform outputs with the convert job: apply the platform first.
  converter_image = "${local.platform.converter_image_base}:${var.converter_image_tag}"
  service_accounts = {
    converter = local.platform.service_accounts["converter"]
    submitter = local.platform.service_accounts["submitter"]
    invoker   = local.platform.service_accounts["invoker"]
    fn-build  = local.platform.service_accounts["fn-build"]
    # The convert job's account, added to the platform with the job: apply the platform first.
    convert-job = local.platform.service_accounts["convert-job"]
    # The deploy account, which holds its rights on each resource here (deployer_roles).
    build = local.platform.service_accounts["build"]
    # The reconcile job's account and the schedule's (vertex engine), added with it: apply the platform first.
    reconciler = local.platform.service_accounts["reconciler"]
    scheduler  = local.platform.service_accounts["scheduler"]
  }
  # Added to the platform outputs with the resource-level deploy grants: apply the platform first.
  deployer_roles = local.platform.deployer_roles
  labels         = local.labels
}

# Detections on arrival (infra/modules/scorer): the Cloud Run service landfall-scorer and its two push
# subscriptions. Its topics and accounts were added to the platform with it: apply the platform first.
module "scorer" {
  source                  = "../../../modules/scorer"
  project_id              = var.project_id
  region                  = var.region
  project_number          = local.platform.project_number
  bucket_name             = local.platform.bucket_name
  detections_topic_name   = local.platform.detections_topic_name
  request_topic_id        = local.platform.request_topic_id
  score_requests_topic_id = local.platform.score_requests_topic_id
  dead_letter_topic_id    = local.platform.scorer_dead_letter_topic_id
  scorer_image            = "${local.platform.scorer_image_base}:${var.scorer_image_tag}"
  max_instances           = var.scorer_max_instances
  service_accounts = {
    scorer         = local.platform.service_accounts["scorer"]
    scorer-invoker = local.platform.service_accounts["scorer-invoker"]
    build          = local.platform.service_accounts["build"]
  }
  deployer_roles = {
    scorer_service = local.platform.deployer_roles["scorer_service"]
    subscription   = local.platform.deployer_roles["subscription"]
  }
  labels = local.labels
}
