"""Web Push (RFC 8030, VAPID RFC 8292, aes128gcm RFC 8291) with pywebpush: the browsers that
turned on "Notify this browser" in Settings are told when a question waits for their user
and none of the user's pages is open (reach.outbox). The service worker (/sw.js) shows the
notification and, when it is clicked, focuses or opens the question's conversation."""

import base64
import binascii
import json
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pywebpush import WebPushException, webpush

from accounts.selectors import preferences_for
from questions.models import Question
from questions.selectors import context_line, question_url
from reach import outbox
from reach.errors import BadSubscription
from reach.models import PushSubscription
from webhooks.addresses import UnsafeUrl, check_url
from webhooks.channels import Send, Skip
from webhooks.models import Delivery

# The most browsers one user may have subscribed; the oldest goes to make room.
MAX_PER_USER = 20
# How long a push service keeps a message for a browser that is offline, unless the
# question's deadline comes first.
DEFAULT_TTL = timedelta(days=1)


class Keys(BaseModel):
    model_config = ConfigDict(extra="ignore")
    p256dh: str = Field(min_length=80, max_length=200)
    auth: str = Field(min_length=16, max_length=100)


class SubscriptionIn(BaseModel):
    """PushSubscription.toJSON() as the browser gives it."""

    model_config = ConfigDict(extra="ignore")
    endpoint: str = Field(max_length=2000)
    keys: Keys


class PushFailed(Exception):
    def __init__(self, status_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


def _decoded_length(value: str) -> int:
    try:
        return len(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (binascii.Error, ValueError):
        return -1


def parse_subscription(data: object) -> SubscriptionIn:
    """Raise BadSubscription unless `data` is a push subscription Parley may send to: an
    https endpoint (http too where WEBHOOK_ALLOW_PRIVATE_NETWORKS) at a public address (as a
    webhook's: the server makes the request), a 65-byte P-256 key and a 16-byte secret."""
    try:
        subscription = SubscriptionIn.model_validate(data)
    except ValidationError:
        raise BadSubscription from None
    schemes = ("https://", "http://") if settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS else ("https://",)
    if not subscription.endpoint.startswith(schemes):
        raise BadSubscription
    if (
        _decoded_length(subscription.keys.p256dh) != 65
        or _decoded_length(subscription.keys.auth) != 16
    ):
        raise BadSubscription
    try:
        check_url(subscription.endpoint)
    except UnsafeUrl:
        raise BadSubscription from None
    return subscription


@transaction.atomic
def subscribe(*, user, data: object) -> PushSubscription:
    """Save this browser's subscription for `user` (a browser another user had subscribed
    now notifies this one). Raises BadSubscription."""
    subscription = parse_subscription(data)
    saved, _created = PushSubscription.objects.update_or_create(
        endpoint=subscription.endpoint,
        defaults={
            "user": user,
            "p256dh": subscription.keys.p256dh,
            "auth": subscription.keys.auth,
            "created_at": timezone.now(),
        },
    )
    extra = PushSubscription.objects.filter(user=user).order_by("-created_at", "-pk")[MAX_PER_USER:]
    PushSubscription.objects.filter(pk__in=list(extra.values_list("pk", flat=True))).delete()
    return saved


def unsubscribe(*, user, endpoint: str) -> bool:
    """Forget one of the user's browsers; whether it was subscribed."""
    deleted, _rows = PushSubscription.objects.filter(user=user, endpoint=endpoint).delete()
    return bool(deleted)


def payload(question: Question, *, language: str = "") -> dict:
    """What the service worker shows: a title, a body and the conversation's URL."""
    with translation.override(language or settings.LANGUAGE_CODE):
        return {
            "title": _("Parley asks: %(summary)s") % {"summary": question.summary},
            "body": context_line(question.message) or str(question.conversation),
            "url": question_url(question),
            "tag": question.key,
        }


def prepare(delivery: Delivery) -> Send:
    """The push of a queued delivery, ready to send; Skip if its question no longer waits or
    its browser is no longer subscribed."""
    subscription = PushSubscription.objects.filter(
        pk=int(delivery.target), user_id=delivery.recipient_id
    ).first()
    question = outbox.waiting_question(delivery)
    if subscription is None:
        raise Skip
    if not settings.VAPID_PRIVATE_KEY:
        raise PushFailed(None, "VAPID_PRIVATE_KEY is not set")
    try:
        check_url(subscription.endpoint)
    except UnsafeUrl:
        raise Skip from None
    data = json.dumps(
        payload(question, language=preferences_for(delivery.recipient).language),
        ensure_ascii=False,
    )
    ttl = DEFAULT_TTL
    if question.expires_at is not None:
        ttl = min(ttl, max(question.expires_at - timezone.now(), timedelta(seconds=1)))
    info = {
        "endpoint": subscription.endpoint,
        "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
    }

    def send() -> int:
        try:
            response = webpush(
                info,
                data=data,
                vapid_private_key=settings.VAPID_PRIVATE_KEY,
                vapid_claims={"sub": settings.VAPID_SUBJECT},
                timeout=settings.WEBHOOK_TIMEOUT,
                ttl=int(ttl.total_seconds()),
            )
        except WebPushException as failure:
            status = failure.response.status_code if failure.response is not None else None
            raise PushFailed(status, f"HTTP {status}" if status else str(failure)) from None
        return response.status_code

    return send


def gone(delivery: Delivery) -> None:
    """The push service answered 404 or 410: the browser's subscription expired."""
    PushSubscription.objects.filter(pk=int(delivery.target)).delete()
