terraform {
  required_version = ">= 1.6"
  required_providers {
    google = {
      # provider schema: cdktf-cdktf-provider-google==16.12.1 (generated from 6.50.0; tests/infra/test_provider_schema.py)
      source  = "hashicorp/google"
      version = "~> 6.50.0"
    }
  }
}
