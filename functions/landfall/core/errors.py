"""One exception root, split by retry class.

Permanent errors are acknowledged, recorded and logged: retrying cannot help.
Temporary errors are raised to the platform so it retries (Pub/Sub redelivery, Eventarc retry).
"""


class LandfallError(Exception):
    """Root of every error Landfall raises on purpose."""


class PermanentError(LandfallError):
    """Retrying will not help: bad input, a missing or invalid manifest, a rejected object."""


class TemporaryError(LandfallError):
    """A dependency is unavailable or throttling: raise so the platform retries with backoff."""


class AccessDenied(TemporaryError):
    """401/403 from a Google API: the identity may not do this, for now. An IAM change takes minutes to
    propagate (https://cloud.google.com/iam/docs/access-change-propagation), as after a first deploy, and a
    missing grant is fixed by a deploy, not by new data: so it is retried and, past the subscription's
    delivery attempts, dead-lettered (replayable), never recorded as a rejected input."""


class BadInput(PermanentError):
    """The arriving data cannot be converted. ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str):
        detail = detail if len(detail) <= 300 else detail[:297] + "..."  # one readable line
        detail = " ".join(detail.split())
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class NotFound(PermanentError):
    """An object, job or manifest that must exist does not."""


class AlreadyExists(LandfallError):
    """Create-if-absent lost the race (HTTP 409/412): someone else created it first.

    Callers that want idempotence treat it as success.
    """


class Conflict(TemporaryError):
    """An optimistic-concurrency update lost (HTTP 409 on an update carrying a stale resourceVersion or
    generation): re-read and try again."""


class Invalid(PermanentError):
    """A request or object breaks its schema (HTTP 422 from the Kubernetes API, a bad manifest)."""


class MissingCRD(PermanentError):
    """The cluster serves no resource of the kind a job is: a 404 on its collection, confirmed by API discovery
    (its group/version does not list it), so its CRD is not installed. No retry helps until a cluster admin installs
    it or the deployment changes engine: the request is refused at once, in one line naming the CRD and both ways
    out (``landfall.submit.backends.kube``). Not a ``NotFound``: nothing that treats a missing object as normal may
    swallow it."""
