# What an operator is told and sees: log-based metrics from Landfall's JSON logs, the
# alerts (each with what to do) and one dashboard. Called by modules/platform; see
# README.md beside this file and docs/operations.md.
#
# Every filter below reads fields the code writes (landfall.core.logs: one JSON object per
# line; Cloud Logging keeps the fields in jsonPayload and takes severity from "severity").
# tests/infra/test_monitoring.py runs the code paths and checks each filter matches the
# lines they log, and nothing else.

locals {
  user_metric = "logging.googleapis.com/user"
  # Where the reconciler's heartbeat lines come from: the Deployment's container next to a cluster, the scheduled
  # Cloud Run job with the vertex engine (its executions log one line a minute between them).
  heartbeat_resource = var.engine == "vertex" ? "cloud_run_job" : "k8s_container"
  heartbeat_doc = {
    cluster = <<-EOT
        The reconciler (Deployment landfall-reconciler, namespace landfall-training) has logged no
        heartbeat: follow-up jobs are not released when their predecessor ends, and jobs that died without
        their chief are not announced. Requests still wait safely in the bucket; nothing is lost.
        1. `kubectl -n landfall-training get deploy,pods -l app.kubernetes.io/name=landfall` and
           `kubectl -n landfall-training logs deploy/landfall-reconciler`.
        2. A pod that crash-loops: its last lines name the cause (credentials, the bucket, the API server).
        3. Meanwhile `landfall status --reconcile` releases waiting follow-ups by hand.
        See docs/operations.md.
    EOT
    vertex  = <<-EOT
        The reconcile job (Cloud Run job landfall-reconcile, started every minute by the Cloud Scheduler job
        landfall-reconcile: the vertex engine) has logged no heartbeat: follow-up jobs are not released when their
        predecessor ends, and jobs that died without their chief are not announced. Requests still wait safely in
        the bucket; nothing is lost.
        1. `gcloud scheduler jobs describe landfall-reconcile --location REGION` (paused? its last attempt's status)
           and `gcloud run jobs executions list --job landfall-reconcile --region REGION`.
        2. An execution that fails: its last lines name the cause (credentials, the bucket, Vertex AI's API).
        3. Meanwhile `landfall status --reconcile` releases waiting follow-ups by hand.
        See docs/deploying.md ("Vertex AI: no cluster") and docs/operations.md.
    EOT
  }
  channels = concat(var.notification_channels, google_monitoring_notification_channel.email[*].name)

  quoted_dead_letters = join(", ", [for s in var.dead_letter_subscriptions : "\"${s}\""])
  quoted_functions    = join(", ", [for f in var.function_names : "\"${f}\""])
  function_requests   = "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.label.service_name=one_of(${local.quoted_functions})"
}

resource "google_monitoring_notification_channel" "email" {
  count        = var.notification_email == "" ? 0 : 1
  project      = var.project_id
  display_name = "Landfall ${var.env} operators"
  type         = "email"
  labels = {
    email_address = var.notification_email
  }
}

# --- log-based metrics -----------------------------------------------------------------

# landfall.core.artifacts.rejections.record: one ERROR line per refused input, both stages.
resource "google_logging_metric" "rejections" {
  project     = var.project_id
  name        = "landfall-rejections"
  description = "Inputs Landfall refused for good (landfall.rejection/v1), by stage, reason and dataset."
  filter      = "jsonPayload.logger=\"landfall.rejections\" AND severity=\"ERROR\" AND jsonPayload.stage:*"
  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "Landfall rejections"
    labels {
      key         = "stage"
      value_type  = "STRING"
      description = "arrival or submit"
    }
    labels {
      key         = "reason"
      value_type  = "STRING"
      description = "The rejection reason (docs/arrival.md lists them)"
    }
    labels {
      key         = "dataset"
      value_type  = "STRING"
      description = "The dataset, empty when it was not a valid name"
    }
  }
  label_extractors = {
    stage   = "EXTRACT(jsonPayload.stage)"
    reason  = "EXTRACT(jsonPayload.reason)"
    dataset = "EXTRACT(jsonPayload.dataset)"
  }
}

# landfall.core.artifacts.results.announce: one INFO line per result message published.
resource "google_logging_metric" "job_results" {
  project     = var.project_id
  name        = "landfall-job-results"
  description = "Finished training jobs (landfall.result/v1 published), by status, verdict and dataset."
  filter      = "jsonPayload.logger=\"landfall.core.results\" AND jsonPayload.message=\"result published\""
  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "Landfall job results"
    labels {
      key         = "status"
      value_type  = "STRING"
      description = "succeeded or failed"
    }
    labels {
      key         = "verdict"
      value_type  = "STRING"
      description = "promoted, kept_champion or not_evaluated"
    }
    labels {
      key         = "dataset"
      value_type  = "STRING"
      description = "The dataset the job trained on"
    }
  }
  label_extractors = {
    status  = "EXTRACT(jsonPayload.status)"
    verdict = "EXTRACT(jsonPayload.verdict)"
    dataset = "EXTRACT(jsonPayload.dataset)"
  }
}

# trainer.task.log_started: the chief's "job started" line, once per job, with the seconds
# from the oldest data arrival the job covers to the start of training (Kueue's queueing
# included).
resource "google_logging_metric" "arrival_to_start" {
  project         = var.project_id
  name            = "landfall-arrival-to-start"
  description     = "Seconds from a job's oldest data arrival to the start of its training, by dataset."
  filter          = "jsonPayload.logger=\"trainer.task\" AND jsonPayload.message=\"job started\" AND jsonPayload.arrival_latency_s:*"
  value_extractor = "EXTRACT(jsonPayload.arrival_latency_s)"
  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "s"
    display_name = "Landfall arrival to job start"
    labels {
      key         = "dataset"
      value_type  = "STRING"
      description = "The dataset the job trains on"
    }
  }
  label_extractors = {
    dataset = "EXTRACT(jsonPayload.dataset)"
  }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 24
      growth_factor      = 2
      scale              = 1
    }
  }
}

# landfall.arrival.handler.after_conversion: one INFO line per arrival converted (in the
# function or by the Cloud Run job's committer); a redelivery logs outcome "duplicate".
resource "google_logging_metric" "arrivals_converted" {
  project     = var.project_id
  name        = "landfall-arrivals-converted"
  description = "Arrivals converted into shards and a manifest, by dataset."
  filter      = "jsonPayload.logger=\"landfall.arrival\" AND jsonPayload.outcome=\"converted\""
  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "Landfall arrivals converted"
    labels {
      key         = "dataset"
      value_type  = "STRING"
      description = "The dataset of the arrival"
    }
  }
  label_extractors = {
    dataset = "EXTRACT(jsonPayload.dataset)"
  }
}

# landfall.reconcile.loop.run: "reconciler heartbeat" after the first pass, then once a minute.
resource "google_logging_metric" "reconciler_heartbeat" {
  project     = var.project_id
  name        = "landfall-reconciler-heartbeat"
  description = "The reconcile loop's heartbeat lines (one a minute while it runs)."
  filter      = "jsonPayload.logger=\"landfall.reconcile\" AND jsonPayload.message=\"reconciler heartbeat\""
  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "Landfall reconciler heartbeat"
  }
}

# landfall.detect.handler: one "detections published" line per scored arrival (landfall.detection/v1 sent),
# WARNING when the champion flagged anomalies, INFO otherwise. Counts the anomalous ones.
resource "google_logging_metric" "anomalous_detections" {
  project     = var.project_id
  name        = "landfall-anomalous-detections"
  description = "Arrivals the dataset's champion flagged anomalies in (landfall.detection/v1 with anomalies > 0), by dataset."
  filter      = "jsonPayload.logger=\"landfall.detect\" AND jsonPayload.message=\"detections published\" AND severity=\"WARNING\""
  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "Landfall anomalous detections"
    labels {
      key         = "dataset"
      value_type  = "STRING"
      description = "The dataset of the scored arrival"
    }
  }
  label_extractors = {
    dataset = "EXTRACT(jsonPayload.dataset)"
  }
}

# --- alerts -----------------------------------------------------------------------------

resource "google_monitoring_alert_policy" "dead_letters" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: dead letters waiting"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.channels
  conditions {
    display_name = "A dead-letter subscription holds messages"
    condition_threshold {
      filter          = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=one_of(${local.quoted_dead_letters})"
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
      trigger {
        count = 1
      }
    }
  }
  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A training request, an arrival or a scorer request failed on every delivery attempt and was moved to its
      dead-letter subscription (`$${resource.label.subscription_id}`). Nothing else is blocked by it.
      1. `landfall status` lists the dead-lettered requests (peeked, not consumed); `landfall report
         --dead-letter $${resource.label.subscription_id}` shows either subscription's.
      2. Find why in the function's ERROR/WARNING lines around the first attempt
         (`jsonPayload.request_id` or `jsonPayload.arrival_id`), or with `landfall trace`.
      3. Fix the cause (permissions, a missing Cloud Run job, an unreachable cluster), then replay:
         `landfall republish --manifest URI` for a request; for an arrival, rewrite the object or
         pull the message and publish it to the notification topic again; for the scorer's
         (landfall-scorer-dead-letter), `landfall rescore --dataset DATASET --since TIME`. Acknowledge what you replayed.
      See docs/operations.md.
    EOT
  }
}

resource "google_monitoring_alert_policy" "failed_results" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: a training job failed"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.channels
  conditions {
    display_name = "A landfall.result/v1 with status failed was published"
    condition_matched_log {
      filter = "jsonPayload.logger=\"landfall.core.results\" AND jsonPayload.message=\"result published\" AND jsonPayload.status=\"failed\""
      label_extractors = {
        job     = "EXTRACT(jsonPayload.job)"
        dataset = "EXTRACT(jsonPayload.dataset)"
      }
    }
  }
  alert_strategy {
    notification_rate_limit {
      period = "300s"
    }
    auto_close = "86400s"
  }
  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Training job `$${log.extracted_label.job}` of dataset `$${log.extracted_label.dataset}` ended Failed;
      its champion did not change. Its arrivals are not lost: the next job of the dataset trains on them.
      1. `landfall trace $${log.extracted_label.job}` shows its state, its error and failed phase from
         runs/<job>/metrics.json, and the arrivals it covered.
      2. Exit codes 1-4 are permanent (a bug, bad arguments, invalid or missing input): fix the input or
         the trainer; 128 and up were retried until the TFJob's backoffLimit.
      3. Rerun with `landfall republish --dataset DATASET` once fixed.
      See docs/operations.md.
    EOT
  }
}

# trainer.judging.verdict: a job that trained but whose model is refused whatever the champion (results.REFUSALS): below
# the naive baseline's floor (no_skill) or the labelled check's (low_average_precision). The champion is kept; a
# dataset's first model is not promoted, so the dataset may have no champion at all.
resource "google_monitoring_alert_policy" "refused_results" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: a trained model was refused (no skill or low average precision)"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = local.channels
  conditions {
    display_name = "A landfall.result/v1 with verdict no_skill or low_average_precision was published"
    condition_matched_log {
      filter = "jsonPayload.logger=\"landfall.core.results\" AND jsonPayload.message=\"result published\" AND (jsonPayload.verdict=\"no_skill\" OR jsonPayload.verdict=\"low_average_precision\")"
      label_extractors = {
        job     = "EXTRACT(jsonPayload.job)"
        dataset = "EXTRACT(jsonPayload.dataset)"
        verdict = "EXTRACT(jsonPayload.verdict)"
      }
    }
  }
  alert_strategy {
    notification_rate_limit {
      period = "3600s"
    }
    auto_close = "86400s"
  }
  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Job `$${log.extracted_label.job}` of dataset `$${log.extracted_label.dataset}` trained, but its model was
      refused (`$${log.extracted_label.verdict}`): the champion did not change, and a dataset without one still
      has none.
      1. `landfall status --dataset $${log.extracted_label.dataset}` shows the job's skill over the naive
         baseline (the training set's mean window) and the min_skill it was held to, or its average precision
         on the labelled set.
      2. no_skill: the model reconstructs held-out data no better than the mean window. Look at the data (pure
         noise, a broken scaling, a unit change) and at the run (`landfall trace JOB`: epochs run, whether the
         held-out loss was still falling at the ceiling; raise training.epochs or the learning rate).
      3. Retrain with `landfall republish --dataset DATASET` once fixed.
      See docs/operations.md and docs/verdicts.md.
    EOT
  }
}

# landfall.arrival.screen.settle: one WARNING line per finding of an arrival whose checks against its dataset's
# reference quarantined it (docs/datasets.md#arrival-checks). The other arrivals train as usual.
resource "google_monitoring_alert_policy" "quarantined_arrivals" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: a dataset quarantined an arrival"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = local.channels
  conditions {
    display_name = "An arrival's checks against its dataset's reference quarantined it"
    condition_matched_log {
      filter = "jsonPayload.logger=\"landfall.arrival\" AND severity=\"WARNING\" AND jsonPayload.check_status=\"quarantined\""
      label_extractors = {
        dataset  = "EXTRACT(jsonPayload.dataset)"
        arrival  = "EXTRACT(jsonPayload.arrival_id)"
        check    = "EXTRACT(jsonPayload.check)"
        feature  = "EXTRACT(jsonPayload.feature)"
        measured = "EXTRACT(jsonPayload.measured)"
      }
    }
  }
  alert_strategy {
    notification_rate_limit {
      period = "3600s"
    }
    auto_close = "86400s"
  }
  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Arrival `$${log.extracted_label.arrival}` of dataset `$${log.extracted_label.dataset}` was quarantined:
      `$${log.extracted_label.check}` on feature `$${log.extracted_label.feature}` measured
      $${log.extracted_label.measured}. It is converted but not trained on; the dataset's other arrivals train as usual.
      1. `landfall status --dataset $${log.extracted_label.dataset}` lists the quarantined arrivals with every
         check, feature and measured value against its threshold; `landfall trace ARRIVAL` shows one.
      2. If the data is right (a new regime, a recalibrated sensor): `landfall admit ARRIVAL --dataset DATASET`;
         it trains with the next job and joins the dataset's reference.
      3. If it is wrong: `landfall reject ARRIVAL --dataset DATASET` (it is never trained on), fix the source
         and upload it again. Thresholds that flag normal data belong in the spec's arrival.checks.
      See docs/operations.md and docs/datasets.md#arrival-checks.
    EOT
  }
}

# Detections on arrival: the champion flagged anomalies in an arrival (landfall.detect.handler's WARNING line),
# one notification per dataset and hour at most.
resource "google_monitoring_alert_policy" "anomalies_detected" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: anomalies detected on a dataset"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = local.channels
  conditions {
    display_name = "A landfall.detection/v1 with anomalies was published"
    condition_matched_log {
      filter = "jsonPayload.logger=\"landfall.detect\" AND jsonPayload.message=\"detections published\" AND severity=\"WARNING\""
      label_extractors = {
        dataset   = "EXTRACT(jsonPayload.dataset)"
        arrival   = "EXTRACT(jsonPayload.arrival_id)"
        anomalies = "EXTRACT(jsonPayload.anomalies)"
        ranges    = "EXTRACT(jsonPayload.ranges)"
        champion  = "EXTRACT(jsonPayload.champion_run)"
      }
    }
  }
  alert_strategy {
    notification_rate_limit {
      period = "3600s"
    }
    auto_close = "86400s"
  }
  documentation {
    mime_type = "text/markdown"
    subject   = "Landfall ${var.env}: anomalies detected on dataset $${log.extracted_label.dataset}"
    content   = <<-EOT
      The champion of dataset `$${log.extracted_label.dataset}` (job `$${log.extracted_label.champion}`) flagged
      $${log.extracted_label.anomalies} anomalies in $${log.extracted_label.ranges} ranges of arrival
      `$${log.extracted_label.arrival}`; one landfall.detection/v1 was published on landfall-detections.
      1. `landfall trace $${log.extracted_label.arrival}` shows the arrival, its checks and its detections.
      2. The scores and the summary (every range, its start, end and peak) are under
         `gs://BUCKET/scores/$${log.extracted_label.dataset}/$${log.extracted_label.arrival}/$${log.extracted_label.champion}/`.
      3. Real anomalies: act on the source. False alarms: look at the champion (`landfall status --dataset
         $${log.extracted_label.dataset}`); once a better one is promoted, `landfall rescore --dataset DATASET
         --since TIME` scores the arrivals again with it.
      This alert notifies at most once an hour; the metric landfall-anomalous-detections counts every one by dataset.
      See docs/operations.md.
    EOT
  }
}

resource "google_monitoring_alert_policy" "function_errors" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: function error rate"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = local.channels
  conditions {
    display_name = "Share of a function's requests answered 5xx"
    condition_threshold {
      filter             = "${local.function_requests} AND metric.label.response_code_class=\"5xx\""
      denominator_filter = local.function_requests
      comparison         = "COMPARISON_GT"
      threshold_value    = var.function_error_ratio
      duration           = "600s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["resource.label.service_name"]
      }
      denominator_aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["resource.label.service_name"]
      }
      trigger {
        count = 1
      }
    }
  }
  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A Landfall function answers many requests with an error (5xx), so Pub/Sub redelivers them and,
      after the subscription's maximum delivery attempts, dead-letters them. 5xx is a temporary error
      the function raised on purpose (a service unreachable or throttling) or a crash.
      1. Read the function's ERROR and WARNING lines (`severity>=WARNING` on its Cloud Run service):
         each names the arrival or request and the reason.
      2. Common causes: Cloud Storage or the cluster API unreachable, a missing grant
         (infra/README.md lists them), the Cloud Run convert job missing, memory exhausted.
      3. Once fixed, waiting messages are redelivered by themselves; dead-lettered ones need a replay
         (see the dead-letter alert).
      See docs/operations.md.
    EOT
  }
}

resource "google_monitoring_alert_policy" "reconciler_heartbeat" {
  project               = var.project_id
  display_name          = "Landfall ${var.env}: reconciler heartbeat missing"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.channels
  conditions {
    display_name = "No reconciler heartbeat line"
    condition_absent {
      filter   = "metric.type=\"${local.user_metric}/${google_logging_metric.reconciler_heartbeat.name}\" AND resource.type=\"${local.heartbeat_resource}\""
      duration = "${var.heartbeat_absent_seconds}s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }
  documentation {
    mime_type = "text/markdown"
    content   = var.engine == "vertex" ? local.heartbeat_doc.vertex : local.heartbeat_doc.cluster
  }
}

# Optional, per dataset that expects data: no arrival converted for N hours.
resource "google_monitoring_alert_policy" "arrivals_stopped" {
  for_each              = var.expected_arrivals
  project               = var.project_id
  display_name          = "Landfall ${var.env}: no arrival of ${each.key} for ${each.value} h"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = local.channels
  conditions {
    display_name = "No arrival of ${each.key} converted"
    condition_absent {
      filter   = "metric.type=\"${local.user_metric}/${google_logging_metric.arrivals_converted.name}\" AND metric.label.dataset=\"${each.key}\""
      duration = "${each.value * 3600}s"
      aggregations {
        alignment_period     = "3600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.dataset"]
      }
      trigger {
        count = 1
      }
    }
  }
  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Dataset `${each.key}` usually receives data, but no arrival was converted for ${each.value} hours.
      1. Did the producer stop writing to gs://BUCKET/incoming/${each.key}/? Check the bucket.
      2. Were its files refused? `landfall status --dataset ${each.key}` and `landfall report` list the
         rejections with their reasons; the rejection metric shows them by reason.
      3. Are arrivals stuck? Look for the arrival dead-letter alert and the on-data-arrival error rate.
      See docs/operations.md.
    EOT
  }
}

# The GPU-budget alert of issue 25 waits for per-dataset specs (budgets) to exist: see README.md.

# --- dashboard --------------------------------------------------------------------------

locals {
  charts = [
    {
      title  = "Rejections by stage and reason"
      filter = "metric.type=\"${local.user_metric}/${google_logging_metric.rejections.name}\""
      group  = ["metric.label.stage", "metric.label.reason"]
      plot   = "STACKED_BAR"
      align  = "ALIGN_SUM"
      reduce = "REDUCE_SUM"
    },
    {
      title  = "Job results by status and verdict"
      filter = "metric.type=\"${local.user_metric}/${google_logging_metric.job_results.name}\""
      group  = ["metric.label.status", "metric.label.verdict"]
      plot   = "STACKED_BAR"
      align  = "ALIGN_SUM"
      reduce = "REDUCE_SUM"
    },
    {
      title  = "Arrivals converted by dataset"
      filter = "metric.type=\"${local.user_metric}/${google_logging_metric.arrivals_converted.name}\""
      group  = ["metric.label.dataset"]
      plot   = "STACKED_BAR"
      align  = "ALIGN_SUM"
      reduce = "REDUCE_SUM"
    },
    {
      title  = "Dead letters waiting"
      filter = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=one_of(${local.quoted_dead_letters})"
      group  = ["resource.label.subscription_id"]
      plot   = "LINE"
      align  = "ALIGN_MAX"
      reduce = "REDUCE_MAX"
    },
    {
      title  = "Function requests answered 5xx"
      filter = "${local.function_requests} AND metric.label.response_code_class=\"5xx\""
      group  = ["resource.label.service_name"]
      plot   = "LINE"
      align  = "ALIGN_SUM"
      reduce = "REDUCE_SUM"
    },
    {
      title  = "Arrivals with anomalies by dataset"
      filter = "metric.type=\"${local.user_metric}/${google_logging_metric.anomalous_detections.name}\""
      group  = ["metric.label.dataset"]
      plot   = "STACKED_BAR"
      align  = "ALIGN_SUM"
      reduce = "REDUCE_SUM"
    },
    {
      title  = "Reconciler heartbeats"
      filter = "metric.type=\"${local.user_metric}/${google_logging_metric.reconciler_heartbeat.name}\""
      group  = []
      plot   = "LINE"
      align  = "ALIGN_SUM"
      reduce = "REDUCE_SUM"
    },
  ]
  count_tiles = [for i, c in local.charts : {
    xPos   = (i % 2) * 24
    yPos   = floor(i / 2) * 16
    width  = 24
    height = 16
    widget = {
      title = c.title
      xyChart = {
        dataSets = [{
          plotType = c.plot
          timeSeriesQuery = {
            timeSeriesFilter = {
              filter = c.filter
              aggregation = {
                alignmentPeriod    = "300s"
                perSeriesAligner   = c.align
                crossSeriesReducer = c.reduce
                groupByFields      = c.group
              }
            }
          }
        }]
      }
    }
  }]
  latency_tile = {
    xPos   = 0
    yPos   = ceil(length(local.charts) / 2) * 16
    width  = 48
    height = 16
    widget = {
      title = "Arrival to job start (p50, p95), seconds"
      xyChart = {
        dataSets = [for p in ["50", "95"] : {
          plotType       = "LINE"
          legendTemplate = "p${p} $${metric.label.dataset}"
          timeSeriesQuery = {
            timeSeriesFilter = {
              filter = "metric.type=\"${local.user_metric}/${google_logging_metric.arrival_to_start.name}\""
              aggregation = {
                alignmentPeriod    = "3600s"
                perSeriesAligner   = "ALIGN_DELTA"
                crossSeriesReducer = "REDUCE_PERCENTILE_${p}"
                groupByFields      = ["metric.label.dataset"]
              }
            }
          }
        }]
      }
    }
  }
}

resource "google_monitoring_dashboard" "landfall" {
  project = var.project_id
  dashboard_json = jsonencode({
    displayName = "Landfall ${var.env}"
    mosaicLayout = {
      columns = 48
      tiles   = concat(local.count_tiles, [local.latency_tile])
    }
  })
}
