"""Web Push (spec 6.2): a browser's subscription saved from Settings, a push through the
outbox when a question waits and none of the user's pages is open, signed with the VAPID key
(verified by the push service here) and encrypted for the subscription (decrypted here with
http_ece); a subscription its push service says is gone is deleted. A push is sent as a
webhook is (webhooks.sending): only to https push services the operator allows, to the
address checked, without following redirects, reading only the status, within one deadline."""

import json
import socket
import ssl
import threading
import time
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection

from core import presence
from reach.models import PushSubscription
from reach.push import NOT_A_PUSH_SERVICE
from tests.fakes import PushService, WebhookReceiver, browser_keys, local_tls
from tests.reach.conftest import PUBLIC_URL
from webhooks import addresses, delivery, sending
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus
from webhooks.services import create_webhook

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PUBLIC_IP = "93.184.215.14"


@pytest.fixture
def vapid(settings):
    """A key pair from `manage.py vapid_keys`, as an operator sets it."""
    out = StringIO()
    call_command("vapid_keys", stdout=out)
    keys = dict(line.split("=", 1) for line in out.getvalue().split())
    settings.VAPID_PUBLIC_KEY = keys["VAPID_PUBLIC_KEY"]
    settings.VAPID_PRIVATE_KEY = keys["VAPID_PRIVATE_KEY"]
    settings.VAPID_SUBJECT = "mailto:ops@example.org"
    # The push service listens on loopback, and the operator allows it.
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    settings.PUSH_SERVICE_HOSTS = ["127.0.0.1", "push.example.org"]
    return keys


@pytest.fixture
def push_service(vapid, monkeypatch):
    """A push service on loopback, whose certificate the server trusts."""
    trusted = ssl.create_default_context(cafile=local_tls()["ca"])
    monkeypatch.setattr(sending, "tls", lambda: trusted)
    service = PushService(vapid["VAPID_PUBLIC_KEY"])
    yield service
    service.close()


@pytest.fixture
def resolver(monkeypatch):
    """Names resolve without a network: push.example.org to loopback, the other names of
    example domains and of the known push services to a public address; each name looked
    up is recorded, in order."""
    real = socket.getaddrinfo
    lookups = []

    def getaddrinfo(host, port, *args, **kwargs):
        lookups.append(host)
        if host == "push.example.org":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        if host.endswith((".example.org", ".example.net", ".com", ".example")):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_IP, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(addresses.socket, "getaddrinfo", getaddrinfo)
    return lookups


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
    from questions import resolving as questions
    from questions.payloads import Answer

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


def test_a_subscription_over_plain_http_is_refused_even_on_a_private_network(
    client, user, push_service
):
    """Push services are reached over https only, even where webhooks may use http."""
    client.force_login(user)
    http = {**push_service.subscription, "endpoint": push_service.url.replace("https", "http")}
    response = client.post("/settings/push/subscribe/", http, content_type="application/json")
    assert response.status_code == 422
    assert response.json() == {"message": str(NOT_A_PUSH_SERVICE)}
    assert not PushSubscription.objects.exists()


@pytest.mark.parametrize(
    ("endpoint", "allowed"),
    [
        ("https://fcm.googleapis.com/fcm/send/dGVzdA:APA91b", True),
        ("https://updates.push.services.mozilla.com/wpush/v2/gAAAAA", True),
        ("https://wns2-by3p.notify.windows.com/w/?token=BQYAAAB", True),
        ("https://web.push.apple.com/QGuQyavXutnMH", True),
        ("https://push.example.net/x", False),
        ("https://evilnotify.windows.com/w/", False),
        ("https://notify.windows.com.example/w/", False),
        ("https://fcm.googleapis.com.example/fcm/send/x", False),
        ("https://ops@fcm.googleapis.com/fcm/send/x", False),
    ],
)
def test_only_the_known_push_services_are_allowed_by_default(
    client, user, resolver, endpoint, allowed
):
    """Chrome's, Firefox's, Edge's and Safari's push services, and nothing else unless the
    operator allows it (PUSH_SERVICE_HOSTS): the server makes the request, and a browser's
    endpoint is always one of its vendor's. The refusal says why."""
    client.force_login(user)
    _key, keys = browser_keys()
    response = client.post(
        "/settings/push/subscribe/",
        {"endpoint": endpoint, "keys": keys},
        content_type="application/json",
    )
    if allowed:
        assert response.status_code == 201
        assert PushSubscription.objects.get().endpoint == endpoint
    else:
        assert response.status_code == 422
        assert response.json() == {"message": str(NOT_A_PUSH_SERVICE)}
        assert not PushSubscription.objects.exists()


def test_an_endpoint_that_url_parsers_read_differently_is_refused_and_never_reached(
    settings, client, user, conversation, push_service, ask, sweep
):
    """`https://127.0.0.1:PORT\\@8.8.8.8/x` is 8.8.8.8 to one URL parser (a public address)
    and 127.0.0.1:PORT to another. It is refused when subscribed; one stored anyway is never
    connected to: the URL is checked and sent by the same parser, and a push service's
    endpoint has no user name."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    settings.PUSH_SERVICE_HOSTS = ["*"]
    port = push_service.server.server_address[1]
    endpoint = f"https://127.0.0.1:{port}\\@8.8.8.8/x"
    client.force_login(user)
    response = client.post(
        "/settings/push/subscribe/",
        {**push_service.subscription, "endpoint": endpoint},
        content_type="application/json",
    )
    assert response.status_code == 422
    assert response.json() == {"message": str(NOT_A_PUSH_SERVICE)}
    PushSubscription.objects.create(user=user, endpoint=endpoint, **push_service.keys)
    ask(user, conversation)
    sweep()
    assert push_service.connections == 0
    row = Delivery.objects.get()
    assert (row.status, row.last_error) == (DeliveryStatus.PENDING, str(NOT_A_PUSH_SERVICE))


def test_a_push_service_redirect_is_not_followed(
    user, conversation, subscribed, push_service, ask, sweep
):
    """A push service that answers 307 to another address (a cloud's metadata service, say)
    gets its answer recorded as a failure; nothing is sent where it pointed."""
    metadata = WebhookReceiver()
    try:
        push_service.statuses = [307]
        push_service.headers = {"Location": metadata.url.replace("/hook", "/latest/meta-data")}
        ask(user, conversation)
        sweep()
        assert metadata.requests == []
    finally:
        metadata.close()
    row = Delivery.objects.get()
    assert (row.status, row.last_status_code) == (DeliveryStatus.PENDING, 307)


def test_a_push_connects_to_the_address_it_checked(
    client, user, conversation, push_service, resolver, ask, sweep
):
    """The push service's name is resolved once per attempt, checked, and that address is
    the one connected to (a second lookup could answer another: DNS rebinding); the request
    still names the host, and its certificate is checked for that name."""
    port = push_service.server.server_address[1]
    push_service.origin = f"https://push.example.org:{port}"
    endpoint = f"{push_service.origin}/push/x"
    client.force_login(user)
    response = client.post(
        "/settings/push/subscribe/",
        {**push_service.subscription, "endpoint": endpoint},
        content_type="application/json",
    )
    assert response.status_code == 201
    ask(user, conversation)
    sweep()
    assert push_service.refused == []
    [headers] = push_service.requests
    assert headers["host"] == f"push.example.org:{port}"
    # Looked up when subscribed and once for the push; nothing else looked the name up.
    assert [host for host in resolver if host == "push.example.org"] == ["push.example.org"] * 2
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED


def test_a_push_services_answer_is_not_read_past_its_status(
    user, conversation, subscribed, push_service, ask, sweep
):
    """A push service that answers with a huge body costs the server nothing: the status
    is all a push reads, and the connection is closed with the rest unread."""
    push_service.body_bytes = 64 * 1024 * 1024
    ask(user, conversation)
    sweep()
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert push_service.answer_ended.wait(10)
    # What loopback's socket buffers take before the push service notices the close.
    assert push_service.body_sent[0] < 16 * 1024 * 1024


@pytest.mark.django_db(transaction=True)
def test_a_push_service_that_trickles_does_not_hold_back_another_users_webhook(
    settings, user, other_user, conversation, subscribed, push_service, ask
):
    """A push service that sends its answer a byte at a time (which no per-read timeout
    trips) holds its own attempt until WEBHOOK_TIMEOUT, and nothing else: the round it is in
    waits for it WEBHOOK_ROUND_SECONDS at most, so another user's webhook, queued meanwhile,
    goes out within about that, as it would alone; a later round records the push's timeout.
    Here the push service's whole answer would take ~8 s."""
    settings.WEBHOOK_TIMEOUT = 4  # longer than a round (1 s) and the 2 s the webhook may take
    push_service.trickle = 0.2
    theirs = WebhookReceiver()
    webhook, _secret = create_webhook(user=other_user, url=theirs.url)
    wake, stop = threading.Event(), threading.Event()

    def sweep_job() -> None:
        """The sweep job's thread: a round of deliveries each time it is woken."""
        try:
            while wake.wait() and not stop.is_set():
                wake.clear()
                delivery.deliver_due()
        finally:
            connection.close()

    thread = threading.Thread(target=sweep_job)
    thread.start()
    try:
        ask(user, conversation)
        wake.set()
        assert push_service.received.wait(10)  # the push is in flight
        Delivery.objects.create(
            webhook=webhook, event_id="msg_theirs", event_type="question.asked", body="{}"
        )
        wake.set()
        assert theirs.received.wait(2)
        push = Delivery.objects.get(channel=DeliveryChannel.PUSH)
        deadline = time.monotonic() + settings.WEBHOOK_TIMEOUT + 5
        while not push.last_error:  # the sweep runs every few seconds; here, when woken
            assert time.monotonic() < deadline, "the push's attempt was never recorded"
            wake.set()
            push_service.answer_ended.wait(0.5)
            push.refresh_from_db()
        assert push.last_error == "No answer within WEBHOOK_TIMEOUT (4 s)"
    finally:
        stop.set()
        wake.set()
        thread.join(30)
        theirs.close()


def test_an_agents_notification_is_pushed_one_per_conversation(
    client, user, subscribed, push_service, sweep, committed
):
    """Claude Code's Notification hook reaches a phone as a question does; its tag makes a
    newer notice of the same conversation replace the older one on the device."""
    from api.tokens import create_token

    token = create_token(user=user, name="hook")[1]
    with committed():
        response = client.post(
            "/hooks/claude-code/notification",
            {
                "session_id": "s1",
                "cwd": "/work/proj",
                "hook_event_name": "Notification",
                "message": "Claude is waiting for your input",
                "notification_type": "idle_prompt",
            },
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200
    assert sweep() == 1
    [payload] = push_service.payloads
    conversation = user.conversations.get()
    assert payload == {
        "title": "Claude Code · proj",
        "body": "Claude is waiting for your input",
        "url": f"{PUBLIC_URL}/c/{conversation.pk}/",
        "tag": f"notice-{conversation.pk}",
    }
