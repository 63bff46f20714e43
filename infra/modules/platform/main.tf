# Platform of one environment: APIs, network, cluster, bucket (and its incoming/
# notification), topics, registry and the workload service accounts. Called by
# infra/envs/<env>/platform with that environment's values; applied by an
# administrator (see infra/README.md).

locals {
  labels = { app = "landfall", env = var.env, managed-by = "terraform" }
  # The vertex engine runs jobs as Vertex AI custom jobs: no cluster is made (docs/deploying.md, "Vertex AI: no
  # cluster"), and Cloud Scheduler starts the reconcile job in the reconciler Deployment's place.
  cluster = var.engine != "vertex"
}

data "google_project" "this" {
  project_id = var.project_id
}

module "services" {
  source     = "../services"
  project_id = var.project_id
}

module "network" {
  source         = "../network"
  project_id     = var.project_id
  region         = var.region
  name           = "landfall-${var.env}"
  master_cidr    = var.master_cidr
  connector_cidr = var.connector_cidr

  depends_on = [module.services]
}

module "storage" {
  source              = "../storage"
  project_id          = var.project_id
  location            = var.region
  bucket_name         = var.bucket_name
  sources_bucket_name = "${var.bucket_name}-sources"
  force_destroy       = var.force_destroy
  labels              = local.labels

  depends_on = [module.services]
}

module "pubsub" {
  source         = "../pubsub"
  project_id     = var.project_id
  project_number = data.google_project.this.number
  bucket_name    = module.storage.bucket_name
  labels         = local.labels

  depends_on = [module.services]
}

module "registry" {
  source     = "../registry"
  project_id = var.project_id
  location   = var.region
  labels     = local.labels

  depends_on = [module.services]
}

module "gke" {
  count                   = local.cluster ? 1 : 0
  source                  = "../gke"
  project_id              = var.project_id
  region                  = var.region
  node_locations          = var.zones
  cluster_name            = "landfall-${var.env}"
  network_id              = module.network.network_id
  subnetwork_id           = module.network.subnetwork_id
  pods_range_name         = module.network.pods_range_name
  services_range_name     = module.network.services_range_name
  master_cidr             = module.network.master_cidr
  master_authorized_cidrs = var.master_authorized_cidrs
  internal_authorized_cidrs = [{
    cidr_block   = module.network.connector_cidr
    display_name = "submit function connector"
  }]
  node_tag              = module.network.node_tag
  release_channel       = var.release_channel
  node_service_account  = module.iam.emails["gke-nodes"]
  gpu_machine_type      = var.gpu_machine_type
  gpu_accelerator_type  = var.gpu_accelerator_type
  gpu_accelerator_count = var.gpu_accelerator_count
  gpu_max_nodes         = var.gpu_max_nodes
  gpu_spot              = var.gpu_spot
  deletion_protection   = var.deletion_protection
  labels                = local.labels

  # Optional pools, off by default (infra/README.md, "Optional GPU pools").
  gpu_flex_start_pool      = var.gpu_flex_start_pool
  gpu_flex_start_max_nodes = var.gpu_flex_start_max_nodes
  gpu_spot_pool            = var.gpu_spot_pool
  gpu_spot_pool_max_nodes  = var.gpu_spot_pool_max_nodes
}

module "triggers" {
  source                 = "../triggers"
  project_id             = var.project_id
  env                    = var.env
  region                 = var.region
  state_bucket           = var.state_bucket
  trainer_repository_id  = module.registry.repository_id
  test_service_account   = module.iam.emails["test"]
  deploy_service_account = module.iam.emails["build"]
  github                 = var.github

  depends_on = [module.services]
}

module "iam" {
  source              = "../iam"
  project_id          = var.project_id
  region              = var.region
  bucket_name         = module.storage.bucket_name
  sources_bucket_name = module.storage.sources_bucket_name
  state_bucket        = var.state_bucket
  topic_name          = module.pubsub.topic_name
  results_topic_name  = module.pubsub.results_topic_name
  # The scorer publishes detections (its only topic).
  detections_topic_name = module.pubsub.detections_topic_name
  repository_name       = module.registry.repository_id
  # Function builds push here only.
  functions_repository_name = module.registry.functions_repository_id
  repository_location       = var.region
  workload_pool             = one(module.gke[*].workload_pool)
  engine                    = var.engine

  depends_on = [module.services]
}

# The vertex engine's reconciler: Cloud Scheduler starts the Cloud Run job landfall-reconcile (made by the functions
# root, infra/modules/functions) every minute, as the scheduler account. Until the functions root is applied the
# attempts fail (the job is not there yet) and are logged; nothing else depends on them.
module "schedule" {
  count                 = local.cluster ? 0 : 1
  source                = "../schedule"
  project_id            = var.project_id
  region                = var.region
  job_name              = var.reconcile_job_name
  service_account_email = module.iam.emails["scheduler"]

  depends_on = [module.services]
}

# Log-based metrics, alerts (each saying what to do) and the dashboard (infra/modules/monitoring).
module "monitoring" {
  source                = "../monitoring"
  project_id            = var.project_id
  env                   = var.env
  notification_channels = var.notification_channels
  notification_email    = var.notification_email
  expected_arrivals     = var.expected_arrivals
  engine                = var.engine
  dead_letter_subscriptions = [
    module.pubsub.dead_letter_subscription_name,
    module.pubsub.arrival_dead_letter_subscription_name,
    module.pubsub.scorer_dead_letter_subscription_name,
  ]

  depends_on = [module.services]
}
