"""The arrival stage's configuration: the data-arrival function and ``landfall convert`` (``LANDFALL_<FIELD>``)."""

from __future__ import annotations

import dataclasses

from landfall.core.artifacts import specs
from landfall.core.config import DATASET_MODES, Seed, Settings, default_project
from landfall.core.contracts.layout import Layout
from landfall.core.errors import BadInput, Invalid
from landfall.core.rules import duplicates
from landfall.core.services.storage import Storage

CSV_HEADER_MODES = ("auto", "present", "absent")
DELETE_POLICIES = ("retract", "keep")
JOBS_BACKENDS = ("cloudrun", "local")


@dataclasses.dataclass(frozen=True)
class ConverterConfig(Settings):
    """The data-arrival function and ``landfall convert``."""

    timesteps: int = Seed.TIMESTEPS
    features: int = Seed.FEATURES
    shard_target_bytes: int = 128 * 1024 * 1024
    npz_array: str | None = None  # the array to take from an .npz holding several
    drop_nonfinite: bool = False  # drop rows with NaN/Inf (counted in the manifest) instead of rejecting
    max_instances: int = 1_000_000_000  # an .npy header declaring more is rejected before any read
    max_npz_ratio: int = 200  # uncompressed/compressed above this is treated as a compression bomb (.npz)
    max_gzip_ratio: int = 200  # the same for .csv.gz
    # Either is measured as it happens (bytes produced against bytes read, past the first 64 MiB), not taken
    # from the archive's headers; no compressed input may expand to more than this, whatever its ratio.
    max_expanded_bytes: int = 64 * 1024**3
    chunk_instances: int = 8192  # instances converted per step: bounds memory
    # The memory this process may use (the function's, or the Cloud Run task's; infra sets it from theirs). A
    # Parquet file whose column readers would not fit is rejected (parquet_too_wide) rather than killed.
    memory_limit_mib: int = 2048
    csv_header: str = "auto"  # auto | present | absent (landfall.arrival.csvfile)
    on_delete: str = "retract"  # retract | keep: what deleting (or archiving) a live arrival does
    # A series dataset (landfall.arrival.series, set by its spec's shape.window and arrival.series): arrivals are a
    # time column and channel columns, stored once as the series; windows of ``timesteps`` rows every
    # ``window_stride`` rows are what the manifest counts. An empty time column: instances, as always.
    series_time_column: str = ""
    series_channels: tuple[str, ...] = ()  # default: every column but the time column and the dropped ones
    series_drop_columns: tuple[str, ...] = ()
    series_max_gap: float | None = None  # None: 3 x the arrival's median step (landfall.arrival.series)
    # Rows of one time (landfall.core.rules.duplicates): reject | first | last | mean (the default: their mean)
    series_duplicate_times: str = duplicates.DEFAULT
    window_stride: int = 1
    # The spec's shape.window.length is auto and not estimated yet (landfall.arrival.autowindow): set by the spec.
    window_auto: bool = False
    # The arrival's profile and its checks against the dataset's reference (landfall.core.quality.profile, .checks):
    # ``checks`` is the spec's arrival.checks as JSON, set per arrival by the stage ("": none, every check warns).
    profile: bool = True
    checks: str = ""
    request_topic: str = "landfall-training-requests"
    # open | registered: registered rejects arrivals of datasets without a spec (unknown_dataset).
    datasets: str = "open"
    # The generation of the dataset spec this conversion follows (landfall.core.artifacts.specs; None: no spec, these
    # settings): set per arrival by the stage, never by hand; recorded in the manifest.
    spec_generation: int | None = None
    storage_retry_s: float = 30.0  # then the platform retries the whole event
    # Large arrivals (landfall.arrival.route): above the threshold the function starts a Cloud Run job.
    inline_max_bytes: int | None = None  # None: per format, from the function's timeout (route.inline_limit)
    task_bytes: int = 2 * 1024**3  # a splittable object gets one task per this many bytes ...
    max_tasks: int = 32  # ... but at most this many
    convert_job: str = "landfall-convert"  # the Cloud Run job: a name in `region`, or projects/P/locations/L/jobs/J
    region: str = "us-central1"
    cloud_run_endpoint: str = ""  # another Cloud Run API endpoint (tests: a fake), REST, anonymous
    # Every this many arrivals (by request id) the function starts a compaction execution of the convert job
    # for the dataset, which compacts past landfall.arrival.compaction's thresholds (0: never). 0 by default, so
    # the local stack and the job's own tasks start none (locally the operator compacts after each job); infra
    # sets 64 for the deployed function, whose convert job holds the grants on compacted/ and snapshots/.
    compact_every: int = 0
    jobs_backend: str = "cloudrun"  # cloudrun | local (`landfall up`: the local operator runs the tasks)
    local_state: str = "./.landfall/local"  # jobs_backend=local: where executions are recorded
    project: str = dataclasses.field(default_factory=default_project)

    def __post_init__(self) -> None:
        if self.csv_header not in CSV_HEADER_MODES:
            raise ValueError(f"csv_header must be one of {CSV_HEADER_MODES}, not {self.csv_header!r}")
        if self.on_delete not in DELETE_POLICIES:
            raise ValueError(f"on_delete must be one of {DELETE_POLICIES}, not {self.on_delete!r}")
        if self.datasets not in DATASET_MODES:
            raise ValueError(f"datasets must be one of {DATASET_MODES}, not {self.datasets!r}")
        if self.jobs_backend not in JOBS_BACKENDS:
            raise ValueError(f"jobs_backend must be one of {JOBS_BACKENDS}, not {self.jobs_backend!r}")
        if self.max_npz_ratio < 1 or self.max_gzip_ratio < 1 or self.max_expanded_bytes < 1:
            raise ValueError("max_npz_ratio, max_gzip_ratio and max_expanded_bytes must be at least 1")
        if self.window_stride < 1 or (self.series_max_gap is not None and not self.series_max_gap > 0):
            raise ValueError("window_stride must be at least 1 and series_max_gap positive")
        if self.series_duplicate_times not in duplicates.POLICIES:
            raise ValueError(f"series_duplicate_times must be one of {', '.join(duplicates.POLICIES)}, not "
                             f"{self.series_duplicate_times!r}")
        if self.task_bytes < 1 or self.max_tasks < 1:
            raise ValueError("task_bytes and max_tasks must be at least 1")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.timesteps, self.features)

    @property
    def series(self) -> bool:
        """Arrivals are series, windowed when read (landfall.arrival.series), not instances."""
        return bool(self.series_time_column)


def with_spec(cfg: ConverterConfig, storage: Storage, bucket: str, dataset: str,
              layout: Layout | None = None) -> ConverterConfig:
    """``cfg`` with the dataset's spec over it (``landfall.core.artifacts.specs``: its shape and arrival rules, and its
    generation, which the manifest records). ``BadInput`` ``unknown_dataset`` under ``LANDFALL_DATASETS=registered``
    for a dataset without a spec, and ``invalid_spec`` for a stored spec that is not valid (written around
    ``landfall datasets apply``): either is recorded like any rejection, and the arrival converts once the spec
    is fixed and the object is written again (or republished)."""
    try:
        spec = specs.for_dataset(storage, bucket, dataset, layout)
    except Invalid as exc:
        raise BadInput("invalid_spec", f"dataset {dataset}'s spec cannot be used: {exc}") from None
    if cfg.datasets == "registered" and not spec.registered:
        raise BadInput("unknown_dataset", f"dataset {dataset} has no spec (gs://{bucket}/"
                       f"{(layout or Layout()).specs_prefix}{dataset}.json) and LANDFALL_DATASETS=registered "
                       "accepts only datasets with one (`landfall datasets apply`)")
    fields = spec.converter_fields()
    return cfg if fields == {"spec_generation": cfg.spec_generation} else dataclasses.replace(cfg, **fields)
