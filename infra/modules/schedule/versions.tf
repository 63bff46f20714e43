terraform {
  required_version = ">= 1.6"
  required_providers {
    google = {
      # provider schema: tests/infra/data/google-provider-7.45.0.json (hashicorp/google v7.45.0; tests/infra/test_provider_schema.py)
      source  = "hashicorp/google"
      version = "~> 7.45.0"
    }
  }
}
