"""Delivering the outbox (webhooks.models.Delivery): a sweep job of every server and worker
process (core.jobs.every_sweep), also run right after the commit that wrote new rows.

The outbox carries webhooks and the channels other apps register (webhooks.channels: e-mail,
Web Push), all claimed, retried and recorded the same way. A webhook and a channel's POST
(a Web Push) are sent the same way too (webhooks.sending); an e-mail, on a thread. A
channel's receiver that answers 404 or 410 is gone: its channel's `gone` hook runs (a push
subscription is deleted) and the row fails without retries.

At least once: a row is claimed by a conditional update that moves its next attempt past the
time the attempt may take, so concurrent sweeps skip it; a process that dies mid-attempt
leaves it due again later. Every attempt sends the same `webhook-id`, signed afresh with the
current timestamp (Standard Webhooks). Failures are retried with exponential backoff, and the
row is marked failed after WEBHOOK_MAX_ATTEMPTS. A receiver that answers 410 Gone is not
retried: its webhook is disabled, and its other pending deliveries are given up
(services.disable_webhook).

Attempts run side by side on the outbox's own event loop (a thread of this process): at most
WEBHOOK_CONCURRENCY at once, at most WEBHOOK_USER_SHARE of them one owner's, each ended at its
deadline (WEBHOOK_TIMEOUT for a POST) however slowly its receiver answers. A round waits for
its attempts at most WEBHOOK_ROUND_SECONDS; one still running then goes on, its row still
claimed, and a later round records it: a user whose receivers are slow delays only their own
deliveries, never the next round's. The job runs on a thread of its own
(chat.engine.runner), so question deadlines never wait for it; rows are claimed and recorded
on that thread.
"""

import asyncio
import concurrent.futures
import logging
import threading
from collections import Counter
from collections.abc import Coroutine
from datetime import timedelta
from http import HTTPStatus
from typing import NamedTuple

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone
from standardwebhooks import Webhook as Signer

from webhooks import channels, sending, services
from webhooks.addresses import UnsafeUrl
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus, DisabledReason
from webhooks.sending import Post

logger = logging.getLogger("parley.webhooks")

# Each round claims at most BATCH due deliveries.
BATCH = 20
MAX_BACKOFF = timedelta(hours=6)
USER_AGENT = "Parley-Webhooks/1"
# What a channel's receiver answers for an address that is gone for good (push services
# answer 404 or 410 for an expired subscription).
GONE_STATUSES = (HTTPStatus.NOT_FOUND, HTTPStatus.GONE)


def deliver_due() -> int:
    """Record the attempts of earlier rounds that have ended, claim the due deliveries there is
    room for (WEBHOOK_CONCURRENCY in flight, WEBHOOK_USER_SHARE of them per owner), start their
    attempts, and record those that end within WEBHOOK_ROUND_SECONDS. Returns how many were
    claimed."""
    deliveries = claim_due(in_flight.owners())
    prepared = {
        delivery.pk: prepare(delivery)
        for delivery in deliveries
        if delivery.channel != DeliveryChannel.WEBHOOK
    }
    for delivery in deliveries:
        in_flight.start(delivery, attempt(delivery, prepared.get(delivery.pk)))
    for delivery, outcome in in_flight.ended(wait=settings.WEBHOOK_ROUND_SECONDS):
        record(
            delivery,
            status_code=outcome.status_code,
            error=outcome.error,
            skipped=outcome.error is SKIPPED,
            retry_after=outcome.retry_after,
            receipt=outcome.receipt,
        )
    return len(deliveries)


class Outcome(NamedTuple):
    """How one attempt ended: the receiver's status (None if none answered) and the error
    ("" when delivered); a channel's receiver may also have said when to try again, or
    answered something its channel keeps (channels.Sent)."""

    status_code: int | None
    error: str
    retry_after: float | None = None
    receipt: dict | None = None


def claim_due(busy: Counter[int]) -> list[Delivery]:
    """Claim the due deliveries there is room for, given how many of each owner's are in
    flight (`busy`): every owner's earliest first, up to their share."""
    room = settings.WEBHOOK_CONCURRENCY - sum(busy.values())
    if room <= 0:
        return []
    now = timezone.now()
    # Each owner's earliest due deliveries (their share), then the earliest of those: however
    # many one owner has due (10 webhooks make 10 a question event), every other owner's are
    # in the same round. Looking only among the earliest due of all would leave another's
    # behind a backlog that the share lets drain at a few a round. A disabled webhook's
    # deliveries are given up as it is disabled; one queued by an event whose transaction
    # raced with that waits, unattempted, until the webhook is enabled.
    owner = Coalesce(F("webhook__owner_id"), F("recipient_id"))  # or an e-mail's, a push's
    due = (
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(webhook__isnull=True) | Q(webhook__disabled_at__isnull=True))
        .annotate(
            owner=owner,
            place=Window(
                RowNumber(),
                partition_by=owner,
                order_by=[F("next_attempt_at").asc(), F("pk").asc()],
            ),
        )
        .filter(place__lte=settings.WEBHOOK_USER_SHARE)
        .order_by("next_attempt_at", "pk")
    )
    claimed = []
    for pk, next_attempt_at, owner_id, place in due.values_list(
        "pk", "next_attempt_at", "owner", "place"
    )[:BATCH]:
        if len(claimed) == room:
            break
        if place + busy[owner_id] > settings.WEBHOOK_USER_SHARE:
            continue
        won = Delivery.objects.filter(
            pk=pk, status=DeliveryStatus.PENDING, next_attempt_at=next_attempt_at
        ).update(
            next_attempt_at=now + timedelta(seconds=max_attempt_seconds() * 3 + 30),
            attempts=F("attempts") + 1,
        )
        if won:
            claimed.append(pk)
    if not claimed:
        return []
    return list(Delivery.objects.select_related("webhook").filter(pk__in=claimed))


class InFlight:
    """The attempts running on the outbox's event loop (started on first use, on a daemon
    thread: a process that exits leaves their rows claimed, to be attempted again once the
    claim lapses)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: dict[concurrent.futures.Future, Delivery] = {}

    def owners(self) -> Counter[int]:
        """How many attempts of each owner are running."""
        with self._lock:
            return Counter(
                d.webhook.owner_id if d.webhook_id else d.recipient_id
                for d in self._running.values()
            )

    def start(self, delivery: Delivery, attempt: Coroutine) -> None:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="parley-outbox", daemon=True
                ).start()
            future = asyncio.run_coroutine_threadsafe(attempt, self._loop)
            self._running[future] = delivery

    def ended(self, *, wait: float) -> list[tuple[Delivery, Outcome]]:
        """The attempts that have ended, waiting up to `wait` seconds for the running ones,
        each with its outcome; they are no longer in flight."""
        with self._lock:
            running = list(self._running)
        if running:
            concurrent.futures.wait(running, timeout=wait)
        with self._lock:
            done = [future for future in self._running if future.done()]
            return [(self._running.pop(future), _outcome(future)) for future in done]


def _outcome(future: concurrent.futures.Future) -> Outcome:
    """An attempt's outcome; one that raised is a failure to retry, never the sweep's end."""
    failure = future.exception()
    if failure is None:
        return Outcome(*future.result())
    logger.error("an outbox attempt raised", exc_info=failure)
    return Outcome(None, f"{type(failure).__name__}: {failure}"[:500])


in_flight = InFlight()


def max_attempt_seconds() -> float:
    """The longest one attempt of any channel may take: a claim outlasts it."""
    return max([settings.WEBHOOK_TIMEOUT, *(c.seconds() for c in channels.registered())])


def headers_for(delivery: Delivery, secret: str) -> dict[str, str]:
    """The Standard Webhooks headers for one attempt."""
    timestamp = timezone.now()
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": delivery.event_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": Signer(secret).sign(delivery.event_id, timestamp, delivery.body),
    }


def prepare(delivery: Delivery) -> channels.Send | Post | tuple[int | None, str]:
    """What a channel's delivery will send (channels.Channel.prepare), read in this thread;
    or the outcome already, when it is skipped or cannot be prepared."""
    sender = channels.channel(delivery.channel)
    if sender is None:
        return None, f"No sender is registered for the {delivery.channel} channel"
    try:
        return sender.prepare(delivery)
    except channels.Skip:
        return None, SKIPPED
    except UnsafeUrl as refused:  # as a webhook's, retried: the operator may allow it again
        return None, str(refused.message)
    except Exception as failure:  # retried, never the sweep's end
        logger.exception("could not prepare %s delivery %s", delivery.channel, delivery.event_id)
        return None, f"{type(failure).__name__}: {failure}"[:500]


async def attempt(
    delivery: Delivery, send: channels.Send | Post | tuple[int | None, str] | None
) -> tuple[int | None, str]:
    """One attempt of a delivery: (its status code, its error). `send`: a channel delivery's
    prepare() (None for a webhook's, signed here)."""
    if isinstance(send, tuple):
        return send
    if delivery.channel == DeliveryChannel.WEBHOOK:
        return await attempt_post(webhook_post(delivery))
    if isinstance(send, Post):
        return await attempt_post(send)
    # prepare() found the channel registered, or its outcome is the tuple above.
    seconds = channels.channel(delivery.channel).seconds()
    return await attempt_channel(send, seconds=seconds)


# The error an attempt returns when its channel's sender skipped the delivery (channels.Skip).
SKIPPED = "Not sent: nothing waits for it any more"


def webhook_post(delivery: Delivery) -> Post:
    """The POST of a claimed webhook delivery, signed now."""
    return Post(
        url=delivery.webhook.url,
        content=delivery.body.encode(),
        headers=headers_for(delivery, delivery.webhook.secret),
    )


async def attempt_post(post: Post) -> tuple[int | None, str]:
    """One attempt of a POST (a webhook's, or a channel's): (the status code, the error)."""
    try:
        status_code = await sending.send(post)
    except UnsafeUrl as refused:
        return None, str(refused.message)
    except TimeoutError:
        return None, f"No answer within WEBHOOK_TIMEOUT ({settings.WEBHOOK_TIMEOUT:g} s)"
    except (httpx.HTTPError, httpx.InvalidURL) as failure:
        return None, f"{type(failure).__name__}: {failure}"[:500]
    return status_code, "" if 200 <= status_code < 300 else f"HTTP {status_code}"


async def attempt_channel(send: channels.Send, *, seconds: float) -> Outcome:
    """One attempt of a prepared channel delivery that is not a POST (an e-mail), on a
    thread, within `seconds` (a sender past it runs on, its outcome ignored: the row is
    retried later)."""
    try:
        async with asyncio.timeout(seconds):
            sent = await asyncio.to_thread(send)
    except TimeoutError:
        return Outcome(None, f"No answer within {seconds:g} s")
    except Exception as failure:  # a sender's failure is retried, never the sweep's end
        status_code = getattr(failure, "status_code", None)
        error = f"{type(failure).__name__}: {failure}"[:500]
        retry_after = failure.seconds if isinstance(failure, channels.RetryLater) else None
        return Outcome(status_code, error, retry_after=retry_after)
    if not isinstance(sent, channels.Sent):
        sent = channels.Sent(status_code=sent)
    status_code = sent.status_code
    if status_code is None or 200 <= status_code < 300:
        return Outcome(status_code, "", receipt=sent.receipt)
    return Outcome(status_code, f"HTTP {status_code}")


def record(
    delivery: Delivery,
    *,
    status_code: int | None,
    error: str,
    skipped: bool = False,
    retry_after: float | None = None,
    receipt: dict | None = None,
) -> None:
    """Record an attempt's outcome. 410 Gone disables the webhook (no retry, nothing more
    queued), and a channel's 404 or 410 calls its `gone` hook; a 2xx counts even if the row
    was given up while the attempt was in flight, and calls its channel's `delivered` hook.
    `retry_after`: the receiver's own delay before the next attempt, instead of the backoff."""
    delivered = not error
    webhook = delivery.channel == DeliveryChannel.WEBHOOK
    gone = status_code == HTTPStatus.GONE if webhook else status_code in GONE_STATUSES
    update, current = _transition(
        delivery, skipped=skipped, delivered=delivered, gone=gone, retry_after=retry_after
    )
    with transaction.atomic():
        Delivery.objects.filter(pk=delivery.pk, status__in=current).update(
            last_status_code=status_code, last_error=error, **update
        )
        disabled = (
            gone
            and webhook
            and services.disable_webhook(webhook_id=delivery.webhook_id, reason=DisabledReason.GONE)
        )
        sender = None if webhook else channels.channel(delivery.channel)
        if gone and sender is not None:
            sender.gone(delivery)
        if delivered and sender is not None:
            sender.delivered(delivery, receipt or {})
    if not skipped:
        _log(delivery, error=error, disabled=disabled)


def _transition(
    delivery: Delivery, *, skipped: bool, delivered: bool, gone: bool, retry_after: float | None
) -> tuple[dict, list[str]]:
    """The fields an attempt's outcome writes, and the statuses the row may be in for it."""
    now = timezone.now()
    if skipped:
        return {"status": DeliveryStatus.SKIPPED}, [DeliveryStatus.PENDING]
    if delivered:
        update = {"status": DeliveryStatus.DELIVERED, "delivered_at": now}
        return update, [DeliveryStatus.PENDING, DeliveryStatus.GIVEN_UP]
    if gone or delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        return {"status": DeliveryStatus.FAILED}, [DeliveryStatus.PENDING]
    if retry_after is not None:
        wait = timedelta(seconds=retry_after)
    else:
        wait = timedelta(seconds=settings.WEBHOOK_RETRY_SECONDS * 2 ** (delivery.attempts - 1))
    return {"next_attempt_at": now + min(wait, MAX_BACKOFF)}, [DeliveryStatus.PENDING]


def _log(delivery: Delivery, *, error: str, disabled: bool) -> None:
    """Log a failed attempt, and a webhook disabled by it."""
    if delivery.channel != DeliveryChannel.WEBHOOK:
        if error:
            logger.warning(
                "%s delivery %s failed (attempt %s): %s",
                delivery.channel,
                delivery.event_id,
                delivery.attempts,
                error,
            )
        return
    if error:
        logger.warning(
            "webhook delivery %s to %s failed (attempt %s): %s",
            delivery.event_id,
            delivery.webhook.url,
            delivery.attempts,
            error,
        )
    if disabled:
        logger.warning(
            "webhook %s to %s disabled: its receiver answered 410 Gone",
            delivery.webhook_id,
            delivery.webhook.url,
        )
