# The two Cloud Build triggers. A build runs as one service account, so testing and
# deploying are two builds:
#   test   (cloudbuild.yaml)        as landfall-test:  `make test`; logs only.
#   deploy (cloudbuild-deploy.yaml) as landfall-build: push, terraform apply of the
#          functions root, kubectl apply; fired by the test build's SUCCESS
#          notification on Cloud Build's `cloud-builds` topic, for the tested commit.
# Both need the repository connected to Cloud Build (GitHub app) first: see
# infra/README.md. Without var.github no trigger is declared.

locals {
  enabled = var.github != null ? 1 : 0
  uri     = var.github != null ? "https://github.com/${var.github.owner}/${var.github.name}" : ""
  ref     = var.github != null ? "refs/heads/${var.github.branch}" : ""
}

resource "google_cloudbuild_trigger" "test" {
  count           = local.enabled
  project         = var.project_id
  name            = "landfall-${var.env}-test"
  description     = "make test on every push to the branch, as landfall-test (no deploy rights)."
  service_account = "projects/${var.project_id}/serviceAccounts/${var.test_service_account}"
  filename        = "cloudbuild.yaml"

  github {
    owner = var.github.owner
    name  = var.github.name
    push {
      branch = "^${var.github.branch}$"
    }
  }
}

resource "google_cloudbuild_trigger" "deploy" {
  count           = local.enabled
  project         = var.project_id
  name            = "landfall-${var.env}-deploy"
  description     = "Deploys the commit whose test build succeeded, as landfall-build."
  service_account = "projects/${var.project_id}/serviceAccounts/${var.deploy_service_account}"

  # Cloud Build publishes every build's status to this topic.
  pubsub_config {
    topic = "projects/${var.project_id}/topics/cloud-builds"
  }

  source_to_build {
    uri       = local.uri
    ref       = local.ref
    repo_type = "GITHUB"
  }

  git_file_source {
    path      = "cloudbuild-deploy.yaml"
    uri       = local.uri
    revision  = local.ref
    repo_type = "GITHUB"
  }

  substitutions = {
    _ENV           = var.env
    _REGION        = var.region
    _AR_REPO       = var.trainer_repository_id
    _STATE_BUCKET  = var.state_bucket
    _TESTED_SHA    = "$(body.message.data.substitutions.COMMIT_SHA)"
    _BUILD_STATUS  = "$(body.message.data.status)"
    _BUILD_TRIGGER = "$(body.message.data.buildTriggerId)"
  }

  # Only a successful build of the test trigger starts a deploy.
  filter = "_BUILD_STATUS == \"SUCCESS\" && _BUILD_TRIGGER == \"${google_cloudbuild_trigger.test[0].trigger_id}\""
}
