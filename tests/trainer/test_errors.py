"""The one classification table (``trainer.errors.classify``) and ``phase``, which applies it where a
failure happens. The exceptions are the ones the libraries really raise, built as they build them
(the end-to-end cases are in test_distributed.py and test_transport.py)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest
import requests
import tensorflow as tf
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exceptions

from landfall.core.errors import BadInput, Invalid, NotFound, TemporaryError
from trainer.errors import (
    EXIT_BUG,
    EXIT_CLUSTER,
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    EXIT_PREEMPTED,
    EXIT_TEMPORARY,
    ClusterFailure,
    Preempted,
    classify,
    exit_code,
    phase,
    phase_of,
)

HEARTBEAT = ("Barrier failed because: task is set to ERROR: UNAVAILABLE: Task /job:worker/replica:0/task:1 "
             "heartbeat timeout. [type.googleapis.com/tensorflow.CoordinationServiceError='']. "
             "Barrier Id: WaitForAllTasks::1::0, Task: /job:worker/replica:0/task:1")


def _from(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


def _while_handling(exc: BaseException, context: BaseException) -> BaseException:
    exc.__context__ = context
    return exc


def _refresh_error_from_transport() -> auth_exceptions.RefreshError:
    """What compute_engine.Credentials.refresh raises while the GKE metadata server is not ready."""
    try:
        try:
            raise auth_exceptions.TransportError("Failed to retrieve http://metadata/computeMetadata/v1/instance/"
                                                 "service-accounts/default/?recursive=true: Connection aborted")
        except auth_exceptions.TransportError as caught:
            raise auth_exceptions.RefreshError(caught) from caught
    except auth_exceptions.RefreshError as exc:
        return exc


def _timeout_waiting_for_the_cluster() -> RuntimeError:
    """What MultiWorkerMirroredStrategy's own cluster wait raises (``raise RuntimeError`` in an except)."""
    try:
        try:
            raise tf.errors.DeadlineExceededError(None, None, "collective timed out")
        except tf.errors.DeadlineExceededError:
            raise RuntimeError("Timeout waiting for the cluster, timeout is 60 seconds")  # noqa: B904 (as TF does)
    except RuntimeError as exc:
        return exc


CASES = [
    # storage and its credentials: 128
    (TemporaryError("gs://b/x: Cloud Storage unavailable"), EXIT_TEMPORARY),
    (auth_exceptions.TransportError("metadata server unavailable"), EXIT_TEMPORARY),
    (_refresh_error_from_transport(), EXIT_TEMPORARY),
    (auth_exceptions.RefreshError("token endpoint answered 503", retryable=True), EXIT_TEMPORARY),
    (requests.ConnectionError("connection refused"), EXIT_TEMPORARY),
    (requests.Timeout("read timed out"), EXIT_TEMPORARY),
    (ConnectionResetError("reset by peer"), EXIT_TEMPORARY),
    (gexc.ServiceUnavailable("503"), EXIT_TEMPORARY),
    (gexc.RetryError("deadline", cause=None), EXIT_TEMPORARY),
    # the cluster: 129
    (ClusterFailure("peer gone"), EXIT_CLUSTER),
    (Preempted("a Spot notice; the epoch is saved"), EXIT_PREEMPTED),  # 128 + SIGTERM: retried (#41)
    (tf.errors.UnavailableError(None, None, "Collective ops is aborted by: task 1 unhealthy"), EXIT_CLUSTER),
    (tf.errors.AbortedError(None, None, "aborted"), EXIT_CLUSTER),
    (tf.errors.DeadlineExceededError(None, None, "collective timed out"), EXIT_CLUSTER),
    (tf.errors.CancelledError(None, None, "cancelled"), EXIT_CLUSTER),
    (tf.errors.InternalError(None, None, HEARTBEAT), EXIT_CLUSTER),
    (_timeout_waiting_for_the_cluster(), EXIT_CLUSTER),
    # bad data: permanent
    (NotFound("gs://b/m.json: not found"), EXIT_NOT_FOUND),
    (Invalid("instance shape is [36, 12]"), EXIT_INVALID),
    (BadInput("corrupt_npz", "bad zip"), EXIT_INVALID),
    (tf.errors.DataLossError(None, None, "corrupted record at 12"), EXIT_INVALID),
    (tf.errors.InvalidArgumentError(None, None, "Input to reshape is a tensor with 350 values"), EXIT_INVALID),
    (_from(Invalid("corrupt record in a shard"), tf.errors.DataLossError(None, None, "x")), EXIT_INVALID),
    # anything else is a bug: permanent, not retried
    (auth_exceptions.RefreshError("invalid_grant: account not found"), EXIT_BUG),
    (auth_exceptions.DefaultCredentialsError("no credentials"), EXIT_BUG),
    (tf.errors.InternalError(None, None, "a kernel failed"), EXIT_BUG),
    (ValueError("a bug"), EXIT_BUG),
    (_while_handling(KeyError("k"), ValueError("v")), EXIT_BUG),
]


@pytest.mark.parametrize(("exc", "code"), CASES, ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v)
def test_the_table(exc, code):
    assert classify(exc) == code
    assert exit_code is classify


def test_a_wrapped_transport_error_is_retryable_but_its_absence_in_the_chain_is_not():
    assert classify(_from(ValueError("decoding the token failed"), requests.ConnectionError("reset"))) == EXIT_TEMPORARY
    suppressed = _while_handling(ValueError("a bug"), requests.ConnectionError("reset"))
    suppressed.__suppress_context__ = True  # ``raise ... from None``
    assert classify(suppressed) == EXIT_BUG


@pytest.mark.parametrize(("exc", "code", "kind", "text"), [
    (tf.errors.UnavailableError(None, None, "{{function_node __wrapped__CollectiveBcastSend}} Collective ops is "
                                "aborted by: task 1 stopped sending heartbeats [Op:CollectiveBcastSend]"),
     EXIT_CLUSTER, ClusterFailure, "the cluster failed (a peer worker died or a collective timed out): "
                                   "UnavailableError: Collective ops is aborted by: task 1 stopped sending heartbeats"),
    (tf.errors.InternalError(None, None, HEARTBEAT), EXIT_CLUSTER, ClusterFailure, "InternalError: Barrier failed"),
    (_refresh_error_from_transport(), EXIT_TEMPORARY, TemporaryError,
     "storage or its credentials are unreachable: RefreshError: Failed to retrieve http://metadata/"),
    (tf.errors.DataLossError(None, None, "corrupted record at 12"), EXIT_INVALID, Invalid,
     "corrupt record in a shard: corrupted record at 12"),
])
def test_a_phase_classes_what_fails_in_it_and_names_itself(exc, code, kind, text):
    with pytest.raises(kind) as raised, phase("building the model and broadcasting its variables"):
        raise exc
    assert text in str(raised.value)
    assert raised.value.__cause__ is exc
    assert exit_code(raised.value) == code
    assert phase_of(raised.value) == "building the model and broadcasting its variables"


def test_a_phase_passes_the_trainers_own_errors_and_bugs_unchanged_and_the_innermost_phase_wins():
    missing = NotFound("gs://b/m.json: not found")
    with pytest.raises(NotFound) as raised, phase("outer"), phase("reading the manifests"):
        raise missing
    assert raised.value is missing and phase_of(missing) == "reading the manifests"
    bug = KeyError("k")
    with pytest.raises(KeyError) as raised, phase("training"):
        raise bug
    assert raised.value is bug and exit_code(bug) == EXIT_BUG and phase_of(bug) == "training"
    with phase("nothing fails"):
        pass
