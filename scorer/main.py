"""The scorer image's entry point (``scorer/Dockerfile``): functions-framework serves ``on_score_request`` from this
file; the function is ``landfall.detect.service``'s (so ``landfall up`` serves the same one from the package)."""

from landfall.detect.service import on_score_request

__all__ = ["on_score_request"]
