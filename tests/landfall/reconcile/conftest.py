"""Fixtures of the reconcile loop's tests."""

from __future__ import annotations

import io
import json
import logging

import pytest

from landfall.core import logs


@pytest.fixture
def json_logs():
    """The ``landfall`` logger's JSON lines, as ``landfall reconcile`` writes them (restored afterwards)."""
    logger = logging.getLogger("landfall")
    saved = logger.handlers[:], logger.level, logger.propagate
    stream = io.StringIO()
    logs.setup(stream=stream)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
