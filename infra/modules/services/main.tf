resource "google_project_service" "this" {
  for_each = toset(var.services)
  project  = var.project_id
  service  = each.key

  # Disabling an API on destroy would break anything else in the project using it.
  disable_on_destroy = false
}
