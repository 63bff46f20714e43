output "bucket_name" {
  description = "Name of the data bucket."
  value       = google_storage_bucket.data.name
}

output "sources_bucket_name" {
  description = "Name of the function sources bucket."
  value       = google_storage_bucket.sources.name
}
