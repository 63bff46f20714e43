# Platform of the prod environment: the shared wiring is modules/platform; this root gives
# it the prod values. Applied by an administrator (see infra/README.md); Cloud Build only
# applies ../functions.

module "platform" {
  source        = "../../../modules/platform"
  env           = "prod"
  force_destroy = false

  project_id            = var.project_id
  region                = var.region
  zones                 = var.zones
  bucket_name           = var.bucket_name
  state_bucket          = var.state_bucket
  gpu_accelerator_type  = var.gpu_accelerator_type
  gpu_accelerator_count = var.gpu_accelerator_count
  gpu_machine_type      = var.gpu_machine_type
  gpu_max_nodes         = var.gpu_max_nodes
  gpu_spot              = var.gpu_spot
  # Optional GPU pools (infra/README.md, "Optional GPU pools"), off unless turned on.
  gpu_flex_start_pool      = var.gpu_flex_start_pool
  gpu_flex_start_max_nodes = var.gpu_flex_start_max_nodes
  gpu_spot_pool            = var.gpu_spot_pool
  gpu_spot_pool_max_nodes  = var.gpu_spot_pool_max_nodes
  master_cidr              = var.master_cidr
  master_authorized_cidrs  = var.master_authorized_cidrs
  github                   = var.github
  connector_cidr           = var.connector_cidr
  release_channel          = var.release_channel
  deletion_protection      = var.deletion_protection
  notification_channels    = var.notification_channels
  notification_email       = var.notification_email
  expected_arrivals        = var.expected_arrivals
  # Where jobs run; vertex makes no cluster (docs/deploying.md, "Vertex AI: no cluster").
  engine = var.engine
}
