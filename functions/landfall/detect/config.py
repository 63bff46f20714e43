"""The scorer's settings (``LANDFALL_*`` variables, as every stage's)."""

from __future__ import annotations

import dataclasses

from landfall.core.artifacts.detections import DETECTIONS_TOPIC
from landfall.core.config import Settings, default_project


@dataclasses.dataclass(frozen=True)
class DetectConfig(Settings):
    """``LANDFALL_BUCKET``: the one bucket it reads and writes (a request naming another is refused);
    ``LANDFALL_DETECTIONS_TOPIC``; ``LANDFALL_MODELS_PREFIX``: where champions live; ``LANDFALL_MODEL_CACHE``: the
    champions one instance keeps loaded (a burst of one dataset loads its champion once);
    ``LANDFALL_PUBLISH_WAIT_S``: how long a summary without its published marker is left to the attempt that wrote
    it (a concurrent duplicate retries meanwhile; after it, any attempt sends the message)."""

    project: str = dataclasses.field(default_factory=default_project)
    bucket: str = ""
    detections_topic: str = DETECTIONS_TOPIC
    models_prefix: str = "models"
    model_cache: int = 4
    publish_wait_s: float = 60.0
