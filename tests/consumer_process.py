"""One consumer instance, as a separate process: ``python -m tests.consumer_process SUB BUCKET STATE LOG STOP
[CLOCK]``.

Pulls training requests from a subscription (created without ordering), handles each with the submit
stage's ``handle_message`` on its own runtime (``local`` backend on a shared state folder), acks on
return, nacks on a temporary error, and appends one JSON line per handled message to LOG, until the
file STOP exists. The interleaving tests run several of these at once. With CLOCK, the retrain policy's time
is the number that file holds (the test's fake clock, ``tests.support.FakeClock``); the policy itself comes from
the environment (``LANDFALL_QUIET_S`` ...).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from landfall.core.contracts.layout import Layout
from landfall.core.contracts.messages import TrainingRequest
from landfall.core.errors import TemporaryError
from landfall.core.runtime import Runtime
from landfall.core.services.pubsub import PubSub
from landfall.core.services.storage import Storage
from landfall.submit.backends.local import LocalBackend
from landfall.submit.config import JobConfig
from landfall.submit.handler import handle_message


def main(subscription: str, bucket: str, state: str, log: str, stop: str, clock: str = "") -> int:
    project = os.environ["GOOGLE_CLOUD_PROJECT"]
    config = JobConfig.load({}, bucket=bucket, project=project, gpus_per_worker=0, local_state=state)
    rt = Runtime(config, Layout(), Storage(project), backend=LocalBackend(state))
    if clock:
        rt.clock = lambda: float(Path(clock).read_text())
    pubsub = PubSub(project)
    with open(log, "a", buffering=1) as out:
        while not Path(stop).exists():
            for m in pubsub.pull(subscription, max_messages=5, timeout_s=1.0):
                try:
                    outcome = handle_message(m.data, m.attributes, rt)
                except TemporaryError:
                    pubsub.nack(subscription, [m.ack_id])
                    continue
                pubsub.ack(subscription, [m.ack_id])
                request = TrainingRequest.from_message(m.data)
                out.write(json.dumps({"dataset": request.dataset, "request_id": request.request_id,
                                      "outcome": outcome, "pid": os.getpid()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
