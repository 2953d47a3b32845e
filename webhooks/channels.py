"""The outbox's channels other than webhooks (e-mail, Web Push): the apps that own them
register a sender from their AppConfig.ready(), and the sweep (webhooks.delivery) claims,
retries and records their deliveries exactly as it does a webhook's."""

from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from core.registry import Registry
from webhooks.models import Delivery
from webhooks.sending import Post


class Skip(Exception):
    """Raised by a sender when nothing waits for its delivery any more (the question was
    resolved first, the subscription was removed): recorded as skipped, never retried."""


class RetryLater(Exception):
    """Raised by a Send when its receiver asked to be tried again later (an HTTP 429 with
    `Retry-After`): the next attempt is `seconds` from now rather than the backoff's, and it
    counts as an attempt."""

    def __init__(self, seconds: float, *, status_code: int | None = 429, reason: str = "") -> None:
        self.seconds = max(float(seconds), 0.0)
        self.status_code = status_code
        super().__init__(reason or f"Retry after {self.seconds:g} s")


@dataclass(frozen=True)
class Sent:
    """What a Send may return instead of a bare status: the status, and what the receiver
    answered that the channel keeps (its `delivered` hook reads it)."""

    status_code: int | None
    receipt: dict = field(default_factory=dict)


# What a prepared delivery that is not an HTTP request does (an e-mail): send it, on a
# thread of its own without the database, and return the receiver's HTTP status (None where
# there is none, as for mail) or a Sent; any exception is a failure to retry (its
# `status_code` attribute, if any, is recorded; RetryLater says when).
Send = Callable[[], int | Sent | None]


@dataclass(frozen=True)
class Channel:
    # Reads what one claimed delivery needs (in the sweep's thread, which may use the
    # database) and returns its Send, or the Post that the sweep sends as it sends a webhook
    # (webhooks.sending); raises Skip, or any exception for a failure to retry.
    prepare: Callable[[Delivery], Send | Post]
    # Called (in the transaction that records it) when the receiver answered 404 or 410:
    # the address is gone for good, and what sent to it should stop.
    gone: Callable[[Delivery], None] = lambda delivery: None
    # Called (in the transaction that records it) when a delivery was delivered, with its
    # Send's Sent.receipt ({} for a bare status): what the receiver answered, to keep (the
    # Slack message's channel and timestamp, which later updates of it name).
    delivered: Callable[[Delivery, dict], None] = lambda delivery, receipt: None
    # Seconds one Send may take (None: WEBHOOK_TIMEOUT; a Post takes that). A sender still
    # running past it is retried later, so it may deliver twice: give a slow protocol (SMTP)
    # its own bound.
    timeout: Callable[[], float] | None = None

    def seconds(self) -> float:
        """How long one attempt may take."""
        return self.timeout() if self.timeout is not None else settings.WEBHOOK_TIMEOUT


# Every channel by the name its deliveries carry.
registry: Registry[Channel] = Registry("outbox channels")


def register(name: str, channel: Channel) -> None:
    registry.add(channel, key=name)


def channel(name: str) -> Channel | None:
    return registry.get(name)


def registered() -> list[Channel]:
    return list(registry)
