"""Web Push (RFC 8030, VAPID RFC 8292, aes128gcm RFC 8291): the browsers that turned on
"Notify this browser" in Settings are told when a question waits for their user and none of
the user's pages is open (reach.outbox). The service worker (/sw.js) shows the notification
and, when it is clicked, focuses or opens the question's conversation.

A push is encrypted with pywebpush and signed with py_vapid, and sent by the outbox as a
webhook is (webhooks.sending): only over https, only to the push services PUSH_SERVICE_HOSTS
allows (the browsers' own, by default), at a public address, checked when a browser
subscribes and at every attempt."""

import base64
import binascii
import json
import time
from datetime import timedelta

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from py_vapid import Vapid
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pywebpush import WebPusher

from accounts.selectors import preferences_for
from questions.models import Question
from questions.selectors import context_line, question_url
from reach import outbox
from reach.errors import BadSubscription
from reach.models import PushSubscription
from webhooks.addresses import UnsafeUrl, check_url, parse_url
from webhooks.channels import Skip
from webhooks.models import Delivery
from webhooks.sending import Post

# The most browsers one user may have subscribed; the oldest goes to make room.
MAX_PER_USER = 20
# How long a push service keeps a message for a browser that is offline, unless the
# question's deadline comes first.
DEFAULT_TTL = timedelta(days=1)
# Why an endpoint is refused: not https, with a user name, or not of a push service that
# PUSH_SERVICE_HOSTS allows.
NOT_A_PUSH_SERVICE = gettext_lazy(
    "Parley does not send notifications to this browser’s push service. An administrator "
    "can allow it."
)


class Keys(BaseModel):
    model_config = ConfigDict(extra="ignore")
    p256dh: str = Field(min_length=80, max_length=200)
    auth: str = Field(min_length=16, max_length=100)


class SubscriptionIn(BaseModel):
    """PushSubscription.toJSON() as the browser gives it."""

    model_config = ConfigDict(extra="ignore")
    endpoint: str = Field(max_length=2000)
    keys: Keys


def _decoded_length(value: str) -> int:
    try:
        return len(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (binascii.Error, ValueError):
        return -1


def is_allowed_push_service(host: str) -> bool:
    """Whether PUSH_SERVICE_HOSTS allows `host` (lower case, IDNA-encoded): an entry names it,
    or is `*.` and a domain it is under, or is `*`."""
    for entry in settings.PUSH_SERVICE_HOSTS:
        allowed = entry.strip().lower()
        if allowed in ("*", host) or (allowed.startswith("*.") and host.endswith(allowed[1:])):
            return True
    return False


def endpoint_url(endpoint: str) -> httpx.URL:
    """`endpoint` parsed as it is sent (webhooks.addresses.parse_url). Raises
    UnsafeUrl(NOT_A_PUSH_SERVICE) unless it is https, without a user name (a push service's
    has none), at a host PUSH_SERVICE_HOSTS allows."""
    try:
        url = parse_url(endpoint)
    except UnsafeUrl:
        raise UnsafeUrl(NOT_A_PUSH_SERVICE) from None
    host = url.raw_host.decode("ascii")
    if url.scheme != "https" or url.userinfo or not is_allowed_push_service(host):
        raise UnsafeUrl(NOT_A_PUSH_SERVICE)
    return url


def check_endpoint(endpoint: str) -> str:
    """endpoint_url, then check_url (its host resolves only to public addresses, unless
    WEBHOOK_ALLOW_PRIVATE_NETWORKS): the address to connect to. Raises UnsafeUrl."""
    endpoint_url(endpoint)
    return check_url(endpoint)


def parse_subscription(data: object) -> SubscriptionIn:
    """Raise BadSubscription unless `data` is a push subscription Parley may send to: an
    endpoint check_endpoint accepts (the refusal says why when its push service is not
    allowed), a 65-byte P-256 key and a 16-byte secret."""
    try:
        subscription = SubscriptionIn.model_validate(data)
    except ValidationError:
        raise BadSubscription from None
    if (
        _decoded_length(subscription.keys.p256dh) != 65
        or _decoded_length(subscription.keys.auth) != 16
    ):
        raise BadSubscription
    try:
        endpoint_url(subscription.endpoint)
    except UnsafeUrl as refused:
        raise BadSubscription(refused.message) from None
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


def notice_payload(notice: outbox.Notice) -> dict:
    """An agent's notification: one per conversation on the device (a newer one replaces it)."""
    return {
        "title": str(notice.conversation),
        "body": notice.text,
        "url": notice.url,
        "tag": f"notice-{notice.conversation.pk}",
    }


def _shown(delivery: Delivery) -> tuple[dict, timedelta]:
    """What the delivery's push says, and how long the push service may keep it (no longer
    than its question may be answered); Skip if what it is about no longer waits."""
    if outbox.is_notice(delivery):
        return notice_payload(outbox.waiting_notice(delivery)), DEFAULT_TTL
    question = outbox.waiting_question(delivery)
    ttl = DEFAULT_TTL
    if question.expires_at is not None:
        ttl = min(ttl, max(question.expires_at - timezone.now(), timedelta(seconds=1)))
    return payload(question, language=preferences_for(delivery.recipient).language), ttl


def prepare(delivery: Delivery) -> Post:
    """The push of a queued delivery, encrypted and signed, for the sweep to send as it sends
    a webhook; Skip if what it is about no longer waits or its browser is no longer subscribed.
    Raises UnsafeUrl if its endpoint is no longer allowed."""
    subscription = PushSubscription.objects.filter(
        pk=int(delivery.target), user_id=delivery.recipient_id
    ).first()
    shown, ttl = _shown(delivery)
    if subscription is None:
        raise Skip
    if not settings.VAPID_PRIVATE_KEY:
        raise ImproperlyConfigured("VAPID_PRIVATE_KEY is not set")
    url = endpoint_url(subscription.endpoint)
    data = json.dumps(shown, ensure_ascii=False)
    keys = {"p256dh": subscription.p256dh, "auth": subscription.auth}
    pusher = WebPusher({"endpoint": subscription.endpoint, "keys": keys})
    return Post(
        url=subscription.endpoint,
        content=pusher.encode(data.encode(), "aes128gcm")["body"],
        headers={
            "content-encoding": "aes128gcm",
            "content-type": "application/octet-stream",
            "ttl": str(int(ttl.total_seconds())),
            **vapid_headers(url),
        },
        check=check_endpoint,
    )


def vapid_headers(url: httpx.URL) -> dict[str, str]:
    """The Authorization header (VAPID, RFC 8292) of a push to `url`: signed with
    VAPID_PRIVATE_KEY, for the push service's origin, valid for 12 hours (at most 24)."""
    claims = {
        "aud": f"{url.scheme}://{url.netloc.decode('ascii')}",
        "sub": settings.VAPID_SUBJECT,
        "exp": int(time.time()) + 12 * 3600,
    }
    return Vapid.from_string(private_key=settings.VAPID_PRIVATE_KEY).sign(claims)


def gone(delivery: Delivery) -> None:
    """The push service answered 404 or 410: the browser's subscription expired."""
    PushSubscription.objects.filter(pk=int(delivery.target)).delete()
