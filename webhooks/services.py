"""Webhook writes: register (the secret is shown once), delete, disable and enable again,
and the outbox rows each question event writes in the transaction that made it
(questions.notifications)."""

import base64
import json
import secrets
import uuid

from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core import jobs
from questions import wire
from questions.notifications import QuestionEvent
from webhooks import selectors
from webhooks.addresses import UnsafeUrl, check_url
from webhooks.models import Delivery, DeliveryStatus, DisabledReason, Webhook

MAX_PER_USER = 10
URL_MAX_CHARS = Webhook._meta.get_field("url").max_length

TOO_MANY = _("You already have the most webhooks allowed (%(limit)s). Delete one first.")
TOO_LONG = _("That URL is too long.")


def new_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def create_webhook(*, user, url: str) -> tuple[Webhook, str]:
    """Register `url` for the user's question events. Returns the webhook and its secret
    (shown once). Raises UnsafeUrl (not http(s), unresolvable, or not a public address)."""
    url = url.strip()
    if len(url) > URL_MAX_CHARS:
        raise UnsafeUrl(TOO_LONG)
    check_url(url)
    if Webhook.objects.filter(owner=user).count() >= MAX_PER_USER:
        raise UnsafeUrl(TOO_MANY % {"limit": MAX_PER_USER})
    secret = new_secret()
    return Webhook.objects.create(owner=user, url=url, secret=secret), secret


def delete_webhook(*, user, webhook_id: int) -> None:
    """Delete one of the user's webhooks (with its delivery log); 404 for anyone else's."""
    deleted, _ = Webhook.objects.filter(owner=user, pk=webhook_id).delete()
    if not deleted:
        raise Http404


@transaction.atomic
def disable_webhook(*, webhook_id: int, reason: DisabledReason) -> bool:
    """Stop sending to a webhook: no event is queued for it until it is enabled again, and
    its pending deliveries are given up, never attempted. Returns whether this call disabled
    it (False: it was already disabled, or is gone)."""
    disabled = Webhook.objects.filter(pk=webhook_id, disabled_at__isnull=True).update(
        disabled_at=timezone.now(), disabled_reason=reason
    )
    selectors.webhooks_changed()
    Delivery.objects.filter(webhook_id=webhook_id, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.GIVEN_UP
    )
    return bool(disabled)


def enable_webhook(*, user, webhook_id: int) -> None:
    """Send the user's webhook the events from now on (what was given up stays so); 404 for
    anyone else's."""
    if not enable_webhooks(webhooks=Webhook.objects.filter(owner=user, pk=webhook_id)):
        raise Http404


def enable_webhooks(*, webhooks: QuerySet[Webhook]) -> int:
    """Enable these webhooks again (the caller chose which it may): returns how many."""
    enabled = webhooks.update(disabled_at=None, disabled_reason="")
    selectors.webhooks_changed()
    return enabled


def event_body(event: QuestionEvent) -> str:
    """The JSON body (spec 6.1): type, timestamp and data with the conversation, the tool
    call, what was asked and an absolute link to it. A question's data has its `questions`;
    an approval's (approval.*) and an elicitation's its `approval` or `elicitation`, with how
    it was decided and the audit (questions.wire)."""
    return json.dumps(
        {
            "type": event.type,
            "timestamp": event.at.isoformat(),
            "data": wire.webhook_data(event.question),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def enqueue(sender, *, event: QuestionEvent, **kwargs) -> None:
    """The outbox: one delivery per enabled webhook that wants the event, in the caller's
    transaction; delivered after commit (core.jobs: the outbox's sweep job)."""
    owners = selectors.webhook_owners()
    if None not in owners and owners.isdisjoint(event.recipient_ids):
        return
    hook_ids = list(
        Webhook.objects.filter(
            Q(owner_id__in=event.recipient_ids) | Q(owner__isnull=True),
            disabled_at__isnull=True,
        ).values_list("pk", flat=True)
    )
    if not hook_ids:
        return
    body = event_body(event)
    Delivery.objects.bulk_create(
        Delivery(
            webhook_id=hook_id,
            event_id=f"msg_{uuid.uuid4().hex}",
            event_type=event.type,
            body=body,
        )
        for hook_id in hook_ids
    )
    jobs.run_soon_on_commit()
