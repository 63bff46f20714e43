"""The one ``Runtime``: what a stage's handler works with, built once per function instance.

A stage's configuration object (``ConverterConfig``, ``JobConfig``), the bucket layout and the external
services. Services a stage does not use stay ``None``; the submit stage opens its TFJob backend on first
use (``landfall.submit.handler.backend_of``), so a backend that cannot be configured is a temporary error
of one request rather than a function that cannot start.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from landfall.core.contracts.layout import Layout
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage

ConfigT = TypeVar("ConfigT")


@dataclasses.dataclass
class Runtime(Generic[ConfigT]):
    config: ConfigT
    layout: Layout
    storage: Storage
    pubsub: PubSub | None = None
    backend: Any = None  # the submit stage's TFJob backend (a landfall.submit.backends.Backend)
    jobs: Any = None  # the arrival stage's Cloud Run jobs (landfall.arrival.cloudrun.CloudRunJobs or LocalJobs)
    clock: Callable[[], float] = time.time  # the submit stage's retrain-policy time (a test passes a fake clock)
