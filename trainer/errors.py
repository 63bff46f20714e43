"""The trainer's exit codes and the one error class it adds to ``landfall.core.errors``.

A TFJob restart policy ``ExitCode`` restarts the replicas on exit codes 128 and up and gives up on
1-127, so every failure is mapped onto one of the two ranges here.
"""

from __future__ import annotations

from landfall.core.errors import LandfallError, NotFound, PermanentError, TemporaryError

EXIT_OK = 0
EXIT_BUG = 1  # unexpected: not retried
EXIT_USAGE = 2  # bad arguments or TF_CONFIG
EXIT_INVALID = 3  # bad manifest or data
EXIT_NOT_FOUND = 4  # a manifest or shard does not exist
EXIT_TEMPORARY = 128  # storage unavailable: retry
EXIT_CLUSTER = 129  # a peer died or a collective failed: restart every worker


class ClusterFailure(LandfallError):
    """A peer worker is gone or a collective failed: every worker must be restarted (retryable)."""


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, PermanentError):
        return EXIT_INVALID
    if isinstance(exc, TemporaryError):
        return EXIT_TEMPORARY
    if isinstance(exc, ClusterFailure):
        return EXIT_CLUSTER
    return EXIT_BUG
