resource "google_storage_bucket" "data" {
  # checkov:skip=CKV_GCP_62:Object access is recorded by Cloud Audit Logs (Data Access logs); legacy usage-log buckets add nothing.
  project       = var.project_id
  name          = var.bucket_name
  location      = var.location
  storage_class = "STANDARD"
  labels        = var.labels
  force_destroy = var.force_destroy

  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"

  versioning {
    enabled = true
  }

  soft_delete_policy {
    retention_duration_seconds = 604800
  }

  # No age rule deletes a dataset's data (tfrecords/, compacted/, snapshots/): a snapshot a live job reads
  # may name an arrival's shards and manifest under tfrecords/ however old they are, and its compacted
  # shards and parts; only the collection rule (landfall.arrival.compaction.collect) knows which no live job
  # may read. A dataset's data leaves by retraction (delete its incoming/ object). tests/infra/test_lifecycle.py.

  lifecycle_rule {
    condition {
      age            = var.runs_coldline_days
      matches_prefix = ["runs/"]
    }
    action {
      type          = "SetStorageClass"
      storage_class = "COLDLINE"
    }
  }

  lifecycle_rule {
    condition {
      age            = var.rejected_retention_days
      matches_prefix = ["rejected/"]
    }
    action {
      type = "Delete"
    }
  }

  # received/ holds one record per training request (landfall.submit.ledger), read by name to
  # recognise a redelivery. Pub/Sub keeps a message at most 31 days, so none can come later.
  lifecycle_rule {
    condition {
      age            = 32
      matches_prefix = ["received/"]
    }
    action {
      type = "Delete"
    }
  }

  # tmp/ holds the shards of conversion attempts; a crashed attempt's leftovers go after a day.
  lifecycle_rule {
    condition {
      age            = 1
      matches_prefix = ["tmp/"]
    }
    action {
      type = "Delete"
    }
  }

  # Versioning keeps overwritten objects; bound how many linger.
  lifecycle_rule {
    condition {
      num_newer_versions = var.noncurrent_versions_kept
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 30
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }
}

resource "google_storage_bucket" "sources" {
  # checkov:skip=CKV_GCP_62:Holds only build inputs (function source archives); audit logs record access.
  project       = var.project_id
  name          = var.sources_bucket_name
  location      = var.location
  storage_class = "STANDARD"
  labels        = var.labels
  force_destroy = var.force_destroy

  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"

  versioning {
    enabled = true
  }

  # Archive names are content hashes: old ones are garbage after a while.
  lifecycle_rule {
    condition {
      age = 90
    }
    action {
      type = "Delete"
    }
  }
}
