resource "google_artifact_registry_repository" "trainer" {
  # checkov:skip=CKV_GCP_84:Images hold code, not data; Google-managed encryption is enough.
  project       = var.project_id
  location      = var.location
  repository_id = var.repository_id
  description   = "Landfall trainer images (tagged with the commit SHA by Cloud Build)."
  format        = "DOCKER"
  labels        = var.labels

  docker_config {
    immutable_tags = true
  }

  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.keep_recent
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "7776000s"
    }
  }
}

# The functions' build images. Cloud Functions gen2 builds push here (build_config
# docker_repository in infra/modules/functions) instead of Google's gcf-artifacts,
# so the function-build account's writer grant is on this repository only and it
# cannot push to the trainer repository above.
resource "google_artifact_registry_repository" "functions" {
  # checkov:skip=CKV_GCP_84:Function images hold code, not data; Google-managed encryption is enough.
  project       = var.project_id
  location      = var.location
  repository_id = var.functions_repository_id
  description   = "Landfall function images (built by Cloud Functions as landfall-fn-build)."
  format        = "DOCKER"
  labels        = var.labels

  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.keep_recent
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "7776000s"
    }
  }
}
