"""Web Push (spec 6.2): a browser's subscription saved from Settings, a push through the
outbox when a question waits and none of the user's pages is open, signed with the VAPID key
(verified by the push service here) and encrypted for the subscription (decrypted here with
http_ece); a subscription its push service says is gone is deleted."""

import json
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command

from chat import presence
from reach.models import PushSubscription
from tests.fakes import PushService, local_tls
from tests.reach.conftest import PUBLIC_URL
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def vapid(settings):
    """A key pair from `manage.py vapid_keys`, as an operator sets it."""
    out = StringIO()
    call_command("vapid_keys", stdout=out)
    keys = dict(line.split("=", 1) for line in out.getvalue().split())
    settings.VAPID_PUBLIC_KEY = keys["VAPID_PUBLIC_KEY"]
    settings.VAPID_PRIVATE_KEY = keys["VAPID_PRIVATE_KEY"]
    settings.VAPID_SUBJECT = "mailto:ops@example.org"
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the push service listens on loopback
    return keys


@pytest.fixture
def push_service(vapid, monkeypatch):
    """A push service on loopback, whose certificate the server trusts."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", local_tls()["ca"])
    service = PushService(vapid["VAPID_PUBLIC_KEY"])
    yield service
    service.close()


@pytest.fixture
def subscribed(client, user, push_service):
    """ada's browser subscribed from Settings (its toJSON() posted, as parley-push.js does)."""
    client.force_login(user)
    response = client.post(
        "/settings/push/subscribe/", push_service.subscription, content_type="application/json"
    )
    assert response.status_code == 201
    return PushSubscription.objects.get()


def test_a_waiting_question_is_pushed_signed_and_encrypted(
    user, conversation, subscribed, push_service, ask, sweep
):
    ask(user, conversation)
    [row] = Delivery.objects.all()
    assert (row.channel, row.recipient, row.target) == (
        DeliveryChannel.PUSH,
        user,
        str(subscribed.pk),
    )
    assert sweep() == 1
    assert push_service.refused == []
    [payload] = push_service.payloads
    assert payload["title"] == "Parley asks: Pizza"
    assert payload["body"] == "I checked the menu of Luigi's."
    assert payload["url"] == f"{PUBLIC_URL}/c/{conversation.pk}/#question-q1"
    [claims] = push_service.claims
    assert claims["sub"] == "mailto:ops@example.org"
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED


def test_the_push_service_would_refuse_another_key(
    settings, user, conversation, subscribed, push_service, ask, sweep
):
    """The service's check is real: a push signed with another key pair is refused."""
    out = StringIO()
    call_command("vapid_keys", stdout=out)
    settings.VAPID_PRIVATE_KEY = out.getvalue().split("VAPID_PRIVATE_KEY=")[1].strip()
    ask(user, conversation)
    sweep()
    assert push_service.payloads == []
    assert push_service.refused
    row = Delivery.objects.get()
    assert (row.status, row.last_status_code) == (DeliveryStatus.PENDING, 401)


@pytest.mark.parametrize("status", [404, 410])
def test_a_subscription_the_push_service_says_is_gone_is_deleted(
    user, conversation, subscribed, push_service, ask, sweep, status
):
    push_service.statuses = [status]
    ask(user, conversation)
    sweep()
    assert not PushSubscription.objects.exists()
    row = Delivery.objects.get()
    assert (row.status, row.last_status_code) == (DeliveryStatus.FAILED, status)


def test_a_push_service_that_fails_is_retried(
    user, conversation, subscribed, push_service, ask, sweep, clock
):
    push_service.statuses = [503]
    ask(user, conversation)
    sweep()
    row = Delivery.objects.get()
    assert (row.status, row.attempts, row.last_status_code) == (DeliveryStatus.PENDING, 1, 503)
    clock.advance(20)
    assert sweep() == 1
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert len(push_service.payloads) == 2  # the same push, once more
    assert PushSubscription.objects.exists()


def test_no_push_while_one_of_the_users_pages_is_open(user, conversation, subscribed, ask):
    cache.set(f"parley:presence:{user.pk}", 1, timeout=presence.PRESENCE_SECONDS)
    assert user.pk in presence.open_pages_of([user.pk])
    ask(user, conversation)
    assert not Delivery.objects.exists()


def test_a_push_for_a_question_answered_first_is_not_sent(
    user, conversation, subscribed, push_service, ask, sweep
):
    from questions import services as questions
    from questions.blocks import Answer

    ask(user, conversation)
    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
    )
    sweep()
    assert push_service.payloads == []
    assert Delivery.objects.get().status == DeliveryStatus.SKIPPED


def test_turning_the_switch_off_deletes_the_subscription(client, subscribed, push_service):
    response = client.post(
        "/settings/push/unsubscribe/",
        {"endpoint": push_service.url},
        content_type="application/json",
    )
    assert response.status_code == 204
    assert not PushSubscription.objects.exists()


def test_only_ones_own_subscription_can_be_deleted(client, other_user, subscribed, push_service):
    client.force_login(other_user)
    client.post(
        "/settings/push/unsubscribe/",
        {"endpoint": push_service.url},
        content_type="application/json",
    )
    assert PushSubscription.objects.exists()


@pytest.mark.parametrize(
    "change",
    [
        lambda s: {**s, "keys": {**s["keys"], "p256dh": "AAAA" * 22}},
        lambda s: {**s, "keys": {**s["keys"], "auth": "short"}},
        lambda s: {**s, "endpoint": "ftp://push.example.org/x"},
        lambda s: {"endpoint": s["endpoint"]},
        lambda s: [],
    ],
)
def test_a_malformed_subscription_is_refused(client, user, push_service, change):
    client.force_login(user)
    response = client.post(
        "/settings/push/subscribe/",
        json.dumps(change(push_service.subscription)),
        content_type="application/json",
    )
    assert response.status_code == 422
    assert not PushSubscription.objects.exists()


def test_a_subscription_to_a_private_address_is_refused(settings, client, user, push_service):
    """The server makes the request, as for a webhook: loopback is refused unless allowed."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    client.force_login(user)
    https = {**push_service.subscription, "endpoint": "https://127.0.0.1/push/x"}
    response = client.post("/settings/push/subscribe/", https, content_type="application/json")
    assert response.status_code == 422


def test_the_service_worker_is_served_at_the_root_without_login(client):
    response = client.get("/sw.js")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    body = response.content.decode()
    assert 'addEventListener("push"' in body
    assert 'addEventListener("notificationclick"' in body


def test_the_settings_page_offers_the_switch_with_the_key(client, user, vapid):
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert 'role="switch"' in page and "Notify this browser" in page
    assert f'data-vapid-key="{vapid["VAPID_PUBLIC_KEY"]}"' in page
