terraform {
  required_version = ">= 1.6"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.40"
    }
  }

  # Configured at init:
  #   terraform init -backend-config="bucket=STATE_BUCKET" -backend-config="prefix=landfall/ENV/platform"
  backend "gcs" {}
}

provider "google" {
  project = var.project_id
  region  = var.region
}
