"""The one module that talks to Pub/Sub (``google-cloud-pubsub``).

``PUBSUB_EMULATOR_HOST`` is honoured by the client itself. Errors come out with their retry class
(``landfall.core.services.google_api``): unavailable/throttled/deadline -> ``TemporaryError``; a missing topic ->
``NotFound``.
"""

from __future__ import annotations

import contextlib
import dataclasses

from google.cloud import pubsub_v1

from landfall.core.errors import AlreadyExists
from landfall.core.services import google_api

PUBLISH_TIMEOUT_S = 60.0


def mapped_errors(what: str) -> contextlib.AbstractContextManager[None]:
    return google_api.mapped_errors(what, "Pub/Sub")


def topic_path(project: str, topic: str) -> str:
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


def subscription_path(project: str, subscription: str) -> str:
    return subscription if subscription.startswith("projects/") else (
        f"projects/{project}/subscriptions/{subscription}")


@dataclasses.dataclass(frozen=True)
class Received:
    data: bytes
    attributes: dict[str, str]
    message_id: str
    ack_id: str
    delivery_attempt: int


class PubSub:
    def __init__(self, project: str):
        self.project = project
        self._publisher: pubsub_v1.PublisherClient | None = None
        self._subscriber: pubsub_v1.SubscriberClient | None = None

    @property
    def publisher(self) -> pubsub_v1.PublisherClient:
        if self._publisher is None:
            self._publisher = pubsub_v1.PublisherClient(
                publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
            )
        return self._publisher

    @property
    def subscriber(self) -> pubsub_v1.SubscriberClient:
        if self._subscriber is None:
            self._subscriber = pubsub_v1.SubscriberClient()
        return self._subscriber

    def publish(self, topic: str, data: bytes, attributes: dict[str, str] | None = None,
                ordering_key: str = "") -> str:
        path = topic_path(self.project, topic)
        try:
            with mapped_errors(path):
                future = self.publisher.publish(path, data, ordering_key=ordering_key, **(attributes or {}))
                return future.result(timeout=PUBLISH_TIMEOUT_S)
        except Exception:
            if ordering_key:  # an ordered key stays paused after a failure until resumed
                self.publisher.resume_publish(path, ordering_key)
            raise

    # -- administration (the local stack and tests; production uses Terraform) -----------------------
    def ensure_topic(self, topic: str) -> str:
        path = topic_path(self.project, topic)
        with contextlib.suppress(AlreadyExists), mapped_errors(path):
            self.publisher.create_topic(name=path)
        return path

    def ensure_subscription(self, subscription: str, topic: str, *, push_endpoint: str | None = None,
                            ack_deadline_s: int = 60, dead_letter_topic: str | None = None,
                            max_delivery_attempts: int = 5, ordering: bool = False) -> str:
        path = subscription_path(self.project, subscription)
        request: dict = {
            "name": path,
            "topic": topic_path(self.project, topic),
            "ack_deadline_seconds": ack_deadline_s,
            "enable_message_ordering": ordering,
            "retry_policy": {"minimum_backoff": {"seconds": 1}, "maximum_backoff": {"seconds": 10}},
        }
        if push_endpoint:
            request["push_config"] = {"push_endpoint": push_endpoint}
        if dead_letter_topic:
            request["dead_letter_policy"] = {
                "dead_letter_topic": topic_path(self.project, dead_letter_topic),
                "max_delivery_attempts": max_delivery_attempts,
            }
        with contextlib.suppress(AlreadyExists), mapped_errors(path):
            self.subscriber.create_subscription(request=request)
        return path

    def pull(self, subscription: str, max_messages: int = 100, timeout_s: float = 5.0) -> list[Received]:
        path = subscription_path(self.project, subscription)
        with mapped_errors(path):
            response = self.subscriber.pull(
                request={"subscription": path, "max_messages": max_messages}, timeout=timeout_s
            )
        return [
            Received(m.message.data, dict(m.message.attributes), m.message.message_id, m.ack_id,
                     m.delivery_attempt)
            for m in response.received_messages
        ]

    def ack(self, subscription: str, ack_ids: list[str]) -> None:
        if ack_ids:
            with mapped_errors(subscription):
                self.subscriber.acknowledge(
                    request={"subscription": subscription_path(self.project, subscription), "ack_ids": ack_ids}
                )

    def nack(self, subscription: str, ack_ids: list[str]) -> None:
        """Hands messages back at once (ack deadline 0): Pub/Sub redelivers them, as after a failed push."""
        if ack_ids:
            with mapped_errors(subscription):
                self.subscriber.modify_ack_deadline(request={
                    "subscription": subscription_path(self.project, subscription), "ack_ids": ack_ids,
                    "ack_deadline_seconds": 0})

    def peek(self, subscription: str, max_messages: int = 100, timeout_s: float = 3.0) -> list[Received]:
        """Pulls messages and hands them straight back: they stay in the subscription."""
        got = self.pull(subscription, max_messages=max_messages, timeout_s=timeout_s)
        self.nack(subscription, [m.ack_id for m in got])
        return got
