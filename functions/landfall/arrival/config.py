"""The arrival stage's configuration: the data-arrival function and ``landfall convert`` (``LANDFALL_<FIELD>``)."""

from __future__ import annotations

import dataclasses

from landfall.core.config import Seed, Settings, default_project

CSV_HEADER_MODES = ("auto", "present", "absent")
DELETE_POLICIES = ("retract", "keep")


@dataclasses.dataclass(frozen=True)
class ConverterConfig(Settings):
    """The data-arrival function and ``landfall convert``."""

    timesteps: int = Seed.TIMESTEPS
    features: int = Seed.FEATURES
    shard_target_bytes: int = 128 * 1024 * 1024
    npz_array: str | None = None  # the array to take from an .npz holding several
    drop_nonfinite: bool = False  # drop rows with NaN/Inf (counted in the manifest) instead of rejecting
    max_instances: int = 1_000_000_000  # an .npy header declaring more is rejected before any read
    max_npz_ratio: int = 200  # uncompressed/compressed above this is treated as a compression bomb
    chunk_instances: int = 8192  # instances converted per step: bounds memory
    csv_header: str = "auto"  # auto | present | absent (landfall.arrival.csvfile)
    on_delete: str = "retract"  # retract | keep: what deleting (or archiving) a live arrival does
    request_topic: str = "landfall-training-requests"
    storage_retry_s: float = 30.0  # then the platform retries the whole event
    project: str = dataclasses.field(default_factory=default_project)

    def __post_init__(self) -> None:
        if self.csv_header not in CSV_HEADER_MODES:
            raise ValueError(f"csv_header must be one of {CSV_HEADER_MODES}, not {self.csv_header!r}")
        if self.on_delete not in DELETE_POLICIES:
            raise ValueError(f"on_delete must be one of {DELETE_POLICIES}, not {self.on_delete!r}")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.timesteps, self.features)
