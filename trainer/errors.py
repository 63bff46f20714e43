"""The trainer's exit codes, the one table that classes a failure, and ``phase``, which applies it.

A TFJob restart policy ``ExitCode`` restarts the replicas on exit codes 128 and up and gives up on
1-127, so every failure is mapped onto one of the two ranges here, by ``classify`` alone:

=====================================================================  ====  =======================
exception (or, for one this table does not know, its cause/context)    code  class
=====================================================================  ====  =======================
``landfall.core.errors.NotFound``                                         4  not found (permanent)
other ``PermanentError`` (``Invalid``, ``BadInput``)                      3  invalid (permanent)
``TemporaryError`` (storage 429/5xx/unreachable, client retries spent)  128  temporary: retry
``google.auth.exceptions.TransportError`` (metadata server or token     128  temporary: retry
endpoint unreachable: Workload Identity not ready in a new pod); a
``RefreshError`` caused by one; any ``GoogleAuthError`` marked retryable
``requests`` ``ConnectionError``/``Timeout``, built-in                  128  temporary: retry
``ConnectionError``/``TimeoutError``, google-api-core 429/5xx/deadline/
``RetryError`` (``landfall.core.services.google_api.TEMPORARY``)
``ClusterFailure``                                                      129  cluster: restart all
``Preempted`` (SIGTERM during ``fit``: the epoch in progress finished,   143  preempted: restart all
saved, every worker stops; ``trainer.training.preemption``)
TensorFlow ``UnavailableError``, ``AbortedError``,                      129  cluster: restart all
``DeadlineExceededError``, ``CancelledError`` (a peer died, a
collective was aborted or timed out)
any TensorFlow error from the coordination service (its status carries  129  cluster: restart all
``CoordinationServiceError``: a peer stopped heartbeating while the
cluster formed)
TensorFlow ``DataLossError`` (a corrupt record)                           3  invalid (permanent)
TensorFlow ``InvalidArgumentError`` (a record that does not decode,       3  invalid (permanent)
a bad setting)
anything else (``RefreshError`` from a refused grant,                     1  a bug (permanent)
``DefaultCredentialsError``, ``ValueError``, ...)
=====================================================================  ====  =======================

Bad arguments and a bad ``TF_CONFIG`` never get this far: ``trainer.task`` exits 2 before it runs a
phase. ``phase(name)`` wraps each step of the run (staging, strategy creation, model build and
variable broadcast, fit, saving, ...): an exception leaving it is re-raised as the trainer's error
of its class (``TemporaryError``, ``ClusterFailure``, ``Invalid``) with a readable message, and
tagged with the phase, so a failure is classed where it happens and ``trainer.task`` only reads
``exit_code`` and ``phase_of``. TensorFlow's rows are looked up only once TensorFlow is loaded
(no exception of its classes can exist before), so this module never imports it.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator

from landfall.core.errors import Invalid, LandfallError, NotFound, PermanentError, TemporaryError
from landfall.core.services import google_api
from trainer import stopwatch

EXIT_OK = 0
EXIT_BUG = 1  # unexpected: not retried
EXIT_USAGE = 2  # bad arguments or TF_CONFIG
EXIT_INVALID = 3  # bad manifest or data
EXIT_NOT_FOUND = 4  # a manifest or shard does not exist
EXIT_TEMPORARY = 128  # storage (or its credentials) unavailable: retry
EXIT_CLUSTER = 129  # a peer died or a collective failed: restart every worker
EXIT_PREEMPTED = 143  # 128 + SIGTERM: a worker had notice (a Spot preemption); the epoch is saved: restart all

# Storage and its credentials out of reach (Cloud Storage, the emulator, the GKE metadata server) are
# recognised by ``landfall.core.services.google_api.is_transient``: only core's wrappers import Google's SDKs.
# TensorFlow's statuses for a lost peer or an aborted or timed-out collective (names in ``tf.errors``).
CLUSTER_STATUSES = ("UnavailableError", "AbortedError", "DeadlineExceededError", "CancelledError")
# The payload TensorFlow attaches to every status that comes from its coordination service.
COORDINATION_SERVICE = "CoordinationServiceError"

PHASE_ATTR = "trainer_phase"


class ClusterFailure(LandfallError):
    """A peer worker is gone or a collective failed: every worker must be restarted (retryable)."""


class Preempted(LandfallError):
    """A worker got SIGTERM while training (a Spot node's notice): every worker stopped after the epoch in progress
    was saved, to be restarted (retryable)."""


def classify(exc: BaseException) -> int:
    """The exit code for ``exc``: the first exception along its ``__cause__``/``__context__`` chain
    that the table knows decides (a ``RefreshError`` raised from a ``TransportError``, a
    ``RuntimeError`` raised while handling a ``DeadlineExceededError``); ``EXIT_BUG`` otherwise."""
    return _lookup(exc)[0]


exit_code = classify


def phase_of(exc: BaseException) -> str | None:
    """The phase ``exc`` left (the innermost ``phase`` it passed through), if any."""
    return getattr(exc, PHASE_ATTR, None)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Runs one phase of the trainer: what leaves it is classed here, by ``classify``.

    The trainer's own errors pass unchanged; a foreign exception the table knows is re-raised as the
    trainer's error of its class (``from`` the original); an unknown one (a bug) passes unchanged,
    traceback and all. Either way the exception is tagged with ``name``.
    """
    try:
        with stopwatch.span(name):  # its start and seconds, in metrics.json's timeline (issue #42)
            yield
    except Exception as exc:
        raised = _classed(exc)
        if phase_of(raised) is None:
            with contextlib.suppress(AttributeError):  # an exception class with __slots__
                setattr(raised, PHASE_ATTR, name)
        if raised is exc:
            raise
        raise raised from exc


def describe(exc: BaseException) -> str:
    """One readable line: TensorFlow's errors without "Graph execution error", frames or node names."""
    text = getattr(exc, "message", None) if _is_tf_error(exc) else None
    text = text or str(exc)
    keep = []
    for line in text.splitlines():
        if not line.strip() or line.startswith((" ", "\t")) or line.startswith(
                ("Graph execution error", "Detected at node", "Detected unsupported operations",
                 "Additional GRPC error information", ":UNKNOWN:")):
            continue
        line = line.replace("<stack traces unavailable>", "")
        line = re.sub(r"\[\[\{\{node [^}]*\}\}\]\]|\[Op:[^\]]*\]|\{\{function_node [^}]*\}\}", "", line).strip()
        if line:
            keep.append(line)
    return " ".join(keep)[:500] or type(exc).__name__


# -- the table ------------------------------------------------------------------------------------

_CLUSTER = "the cluster failed (a peer worker died or a collective timed out): {type}: {text}"
_TRANSPORT = "storage or its credentials are unreachable: {type}: {text}"
_CORRUPT = "corrupt record in a shard: {text}"
_UNDECODABLE = "a record does not decode as the model's instances, or a setting is invalid: {text}"


def _lookup(exc: BaseException) -> tuple[int, str | None]:
    """``(code, message template)``; the template is None for the trainer's own errors (already
    classed) and for unknown ones."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        row = _row(current)
        if row is not None:
            return row
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return EXIT_BUG, None


def _row(exc: BaseException) -> tuple[int, str | None] | None:
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND, None
    if isinstance(exc, PermanentError):
        return EXIT_INVALID, None
    if isinstance(exc, TemporaryError):
        return EXIT_TEMPORARY, None
    if isinstance(exc, ClusterFailure):
        return EXIT_CLUSTER, None
    if isinstance(exc, Preempted):
        return EXIT_PREEMPTED, None
    if google_api.is_transient(exc):
        return EXIT_TEMPORARY, _TRANSPORT
    tf_errors = _tf_errors()
    if tf_errors is None or not isinstance(exc, tf_errors.OpError):
        return None
    if isinstance(exc, tuple(getattr(tf_errors, n) for n in CLUSTER_STATUSES)) or COORDINATION_SERVICE in str(exc):
        return EXIT_CLUSTER, _CLUSTER
    if isinstance(exc, tf_errors.DataLossError):
        return EXIT_INVALID, _CORRUPT
    if isinstance(exc, tf_errors.InvalidArgumentError):
        return EXIT_INVALID, _UNDECODABLE
    return None


_CLASSES = {EXIT_CLUSTER: ClusterFailure, EXIT_TEMPORARY: TemporaryError, EXIT_INVALID: Invalid}


def _classed(exc: BaseException) -> BaseException:
    """``exc`` as the trainer's error of its class; unchanged if it is one already, or unknown."""
    if isinstance(exc, LandfallError):
        return exc
    code, template = _lookup(exc)
    if template is None:  # a bug, or a foreign exception raised while handling one of ours
        return exc
    return _CLASSES[code](template.format(type=type(exc).__name__, text=describe(exc)))


def _tf_errors():
    tf = sys.modules.get("tensorflow")
    return getattr(tf, "errors", None) if tf is not None else None


def _is_tf_error(exc: BaseException) -> bool:
    tf_errors = _tf_errors()
    return tf_errors is not None and isinstance(exc, tf_errors.OpError)
