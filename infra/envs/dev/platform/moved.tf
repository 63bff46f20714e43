# State written before the wiring moved into modules/platform: the same objects, new addresses
# (terraform plan shows moves, not replacements).

moved {
  from = module.services
  to   = module.platform.module.services
}

moved {
  from = module.network
  to   = module.platform.module.network
}

moved {
  from = module.storage
  to   = module.platform.module.storage
}

moved {
  from = module.pubsub
  to   = module.platform.module.pubsub
}

moved {
  from = module.registry
  to   = module.platform.module.registry
}

moved {
  from = module.gke
  to   = module.platform.module.gke
}

moved {
  from = module.iam
  to   = module.platform.module.iam
}

# The cluster became optional (the vertex engine makes none): the one cluster of a state written before is instance 0.
moved {
  from = module.platform.module.gke
  to   = module.platform.module.gke[0]
}
