"""Webhooks (spec 6.1): registration with server-side request forgery checks, the secret
shown once, the outbox written with each question event, Standard Webhooks signatures,
retries with the same webhook-id, and a bounded number of attempts."""

import json
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

from chat import services
from questions import approvals, deadlines, resolving
from questions import resolving as questions
from questions.payloads import Answer, arguments_digest
from tests.api.tool_requests import SHOPPING, WRITE_NOTE, ask_approvals, ask_elicitation
from tests.fakes import WebhookReceiver
from webhooks import addresses, delivery, sending
from webhooks import services as webhook_services
from webhooks.addresses import NOT_PUBLIC
from webhooks.models import Delivery, DeliveryStatus, DisabledReason, Webhook
from webhooks.services import create_webhook

# Also run on PostgreSQL (make test): deliveries are claimed by conditional updates.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PUBLIC_IP = "93.184.215.14"


@pytest.fixture
def resolver(monkeypatch):
    """Names resolve without a network: example.org to a public address, the rest as given."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host.endswith("example.org"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_IP, port))]
        if host == "rebinds.example.net":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(addresses.socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def receiver():
    server = WebhookReceiver()
    yield server
    server.close()


@pytest.fixture
def hooked(settings, user, receiver):
    """The user's webhook points at the loopback receiver (private networks allowed)."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    webhook, secret = create_webhook(user=user, url=receiver.url)
    return webhook, secret


@pytest.fixture
def ask(model, committed):
    """`ask(user, conversation)`: the user's message starts a turn that asks a question."""

    def ask(user, conversation):
        model.asks()
        with committed():
            services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")

    return ask


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/hook",
        "http://localhost/hook",
        "http://10.0.0.5/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "http://rebinds.example.net/hook",
    ],
)
def test_private_addresses_are_refused_and_the_user_is_told(client, user, resolver, url):
    client.force_login(user)
    response = client.post(reverse("webhooks:settings"), {"url": url})
    assert response.status_code == 422
    html = response.content.decode()
    assert 'role="alert">' + str(NOT_PUBLIC).replace("'", "&#x27;") in html
    assert f'value="{url}"' in html  # what the user typed is kept
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b:1::5db8:d822",  # local-use NAT64 (RFC 8215), whatever it carries
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254, the cloud metadata address
        "::127.0.0.1",  # IPv4-compatible
        "::ffff:0:10.0.0.1",  # IPv4-translated
        "2001:0:5db8:d822::f5ff:fffe",  # Teredo: public server, client 10.0.0.1
        "2001:0:a00:1::f7f7:f7f7",  # Teredo: server 10.0.0.1, public client
        "fec0::1",  # site-local
    ],
)
def test_ipv6_addresses_that_lead_to_a_private_network_are_refused(client, user, address):
    """An IPv6 address that carries an IPv4 one is reached through it: that one must be
    public too (the same check runs before every delivery)."""
    client.force_login(user)
    url = f"http://[{address}]/hook"
    response = client.post(reverse("webhooks:settings"), {"url": url})
    assert response.status_code == 422
    assert 'role="alert">' + str(NOT_PUBLIC).replace("'", "&#x27;") in response.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "address",
    [
        "2606:4700:4700::1111",
        "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
        "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    ],
)
def test_public_ipv6_addresses_are_accepted(client, user, address):
    client.force_login(user)
    url = f"http://[{address}]/hook"
    response = client.post(reverse("webhooks:settings"), {"url": url})
    assert response.status_code == 201
    assert Webhook.objects.get().url == url


@pytest.mark.parametrize("url", ["ftp://example.org/x", "example.org/hook", "http://", "x" * 3000])
def test_urls_that_are_not_http_are_refused(client, user, resolver, url):
    client.force_login(user)
    response = client.post(reverse("webhooks:settings"), {"url": url})
    assert response.status_code == 422
    assert 'role="alert"' in response.content.decode()
    assert not Webhook.objects.exists()


def test_private_addresses_are_allowed_when_the_operator_says_so(settings, user):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    create_webhook(user=user, url="http://127.0.0.1:9000/hook")
    assert Webhook.objects.count() == 1


def test_the_secret_is_shown_once(client, user, resolver):
    client.force_login(user)
    response = client.post(reverse("webhooks:settings"), {"url": "https://hooks.example.org/p"})
    assert response.status_code == 201
    webhook = Webhook.objects.get()
    assert webhook.secret.startswith("whsec_")
    assert webhook.secret in response.content.decode()
    page = client.get(reverse("webhooks:settings")).content.decode()
    assert "https://hooks.example.org/p" in page
    assert webhook.secret not in page


def test_only_the_owner_can_delete_a_webhook(client, user, other_user, resolver):
    webhook, _ = create_webhook(user=user, url="https://hooks.example.org/p")
    client.force_login(other_user)
    assert client.post(reverse("webhooks:delete", args=[webhook.pk])).status_code == 404
    assert Webhook.objects.exists()
    client.force_login(user)
    client.post(reverse("webhooks:delete", args=[webhook.pk]))
    assert not Webhook.objects.exists()


def test_each_question_event_writes_one_delivery(settings, user, conversation, hooked, ask):
    settings.PUBLIC_URL = "https://parley.example.org"
    ask(user, conversation)
    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
    )
    rows = list(Delivery.objects.order_by("id"))
    assert [row.event_type for row in rows] == ["question.asked", "question.answered"]
    body = json.loads(rows[0].body)
    assert set(body) == {"type", "timestamp", "data"}
    assert body["data"]["conversationId"] == conversation.pk
    assert body["data"]["toolCallId"] == "q1"
    assert body["data"]["tool"] == "question"
    assert body["data"]["questions"][0]["question"] == "Which pizza?"
    assert body["data"]["url"] == f"https://parley.example.org/c/{conversation.pk}/#question-q1"


def test_an_approval_is_requested_and_resolved_signed_with_its_data(
    settings, user, conversation, hooked, receiver, dispatched
):
    settings.PUBLIC_URL = "https://parley.example.org"
    _, secret = hooked
    ask_approvals(conversation.pk)
    edited = {**SHOPPING, "text": "Milk"}
    approvals.decide(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="w1",
        decision="allow",
        arguments=edited,
        via="api",
    )
    rows = list(Delivery.objects.order_by("id"))
    assert [row.event_type for row in rows] == ["approval.requested", "approval.resolved"]
    assert delivery.deliver_due() == 2
    events = receiver.events(secret)  # raises unless each signature verifies
    requested, resolved = (events[row.event_id] for row in rows)
    assert requested["type"] == "approval.requested"
    data = requested["data"]
    assert data["conversationId"] == conversation.pk
    assert (data["toolCallId"], data["tool"]) == ("w1", "tool_approval")
    assert data["approval"] == {
        "name": WRITE_NOTE,
        "server": "notes",
        "tool": "write_note",
        "agent": "",
        "title": "Write note",
        "description": "Create or replace a note.",
        "arguments": SHOPPING,
        "inputSchema": data["approval"]["inputSchema"],
        "argumentsDigest": arguments_digest(SHOPPING),
        "subagentNumber": None,
        "subagent": "",
    }
    assert (data["decision"], data["questionResolution"], data["answeredBy"]) == (
        None,
        "asked",
        None,
    )
    assert data["url"] == f"https://parley.example.org/c/{conversation.pk}/#question-w1"
    assert "questions" not in data
    assert resolved["type"] == "approval.resolved"
    decided = resolved["data"]
    assert (decided["decision"], decided["editedArguments"]) == ("allow", edited)
    assert (decided["questionResolution"], decided["answeredBy"], decided["answeredVia"]) == (
        "replied",
        "ada",
        "api",
    )
    assert decided["approval"]["arguments"] == SHOPPING
    for headers, body in receiver.requests:  # the same signature as question events
        assert headers["webhook-signature"].startswith("v1,")
        assert Verifier(secret).verify(body, headers)["data"]["toolCallId"] == "w1"
        with pytest.raises(WebhookVerificationError):
            Verifier(secret).verify(body.replace("shopping", "shipping"), headers)


def test_a_denied_approval_is_resolved_with_the_feedback(user, conversation, hooked, dispatched):
    ask_approvals(conversation.pk)
    approvals.decide(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="w1",
        decision="deny",
        feedback="Not now.",
    )
    resolved = json.loads(Delivery.objects.get(event_type="approval.resolved").body)["data"]
    assert (resolved["decision"], resolved["feedback"]) == ("deny", "Not now.")
    assert resolved["questionResolution"] == "rejected"


def test_an_elicitation_is_asked_with_its_form_and_its_answer_tells_nobody(
    user, conversation, hooked, dispatched
):
    ask_elicitation(conversation.pk)
    body = json.loads(Delivery.objects.get().body)
    assert body["type"] == "question.asked"
    data = body["data"]
    assert (data["toolCallId"], data["tool"]) == ("elicit_x", "elicitation")
    assert data["elicitation"]["message"] == "Details for the new note"
    assert data["elicitation"]["server"] == "notes"
    assert [f["name"] for f in data["elicitation"]["fields"]] == [
        "name",
        "text",
        "pinned",
        "priority",
        "colour",
    ]
    assert (data["action"], data["content"]) == (None, None)
    resolving.answer_elicitation(
        user=user, conversation_id=conversation.pk, tool_call_id="elicit_x", action="decline"
    )
    assert Delivery.objects.count() == 1  # the tool that asked reads the answer itself


def test_another_users_questions_do_not_reach_the_webhook(user, other_user, hooked, ask):
    conversation = services.create_conversation(owner=other_user)
    ask(other_user, conversation)
    assert not Delivery.objects.exists()


def test_a_webhook_for_everyone_gets_every_users_events(settings, other_user, ask):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    Webhook.objects.create(owner=None, url="http://127.0.0.1:9/", secret="whsec_AAAA")
    conversation = services.create_conversation(owner=other_user)
    ask(other_user, conversation)
    assert Delivery.objects.get().event_type == "question.asked"


def test_rejected_and_expired_events(settings, user, conversation, hooked, clock, ask, committed):
    settings.QUESTION_EXPIRE_AFTER = 60
    settings.QUESTION_REMIND_BEFORE = 10
    ask(user, conversation)
    clock.advance(55)
    with committed():
        deadlines.sweep()
    clock.advance(10)
    with committed():
        deadlines.sweep()
    second = services.create_conversation(owner=user)
    ask(user, second)
    questions.reject_question(user=user, conversation_id=second.pk, tool_call_id="q1")
    assert list(Delivery.objects.order_by("id").values_list("event_type", flat=True)) == [
        "question.asked",
        "question.reminder",
        "question.expired",
        "question.asked",
        "question.rejected",
    ]


def test_deliveries_are_signed_per_standard_webhooks(user, conversation, hooked, receiver, ask):
    _, secret = hooked
    ask(user, conversation)
    assert delivery.deliver_due() == 1
    [(headers, body)] = receiver.requests
    row = Delivery.objects.get()
    assert headers["webhook-id"] == row.event_id
    assert Verifier(secret).verify(body, headers)["type"] == "question.asked"
    with pytest.raises(WebhookVerificationError):
        Verifier(secret).verify(body.replace("Which", "Whose"), headers)
    assert row.status == DeliveryStatus.DELIVERED and row.attempts == 1


def test_a_receivers_answer_is_not_read_past_its_status(user, conversation, hooked, receiver, ask):
    """A receiver that answers with a huge body costs the server nothing: the status is all a
    delivery reads, and the connection is closed with the rest unread."""
    receiver.body_bytes = 256 * 1024 * 1024
    ask(user, conversation)
    assert delivery.deliver_due() == 1
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert receiver.answer_ended.wait(10)
    # What loopback's socket buffers take before the receiver notices the close.
    assert receiver.body_sent[0] < 16 * 1024 * 1024


def test_a_receiver_that_trickles_its_answer_gets_no_more_than_the_timeout(
    user, conversation, hooked, receiver, ask, settings
):
    """httpx's timeouts bound each read; a receiver that sends its status line a byte at a
    time never trips one, and would hold the attempt (and the sweep's thread, and the other
    deliveries behind it) as long as it liked. The attempt as a whole ends at WEBHOOK_TIMEOUT,
    as a failure to retry: here the whole answer would take ~4 s, and be a 200."""
    settings.WEBHOOK_TIMEOUT = 0.5
    receiver.trickle = 0.1
    ask(user, conversation)
    assert delivery.deliver_due() == 1
    row = Delivery.objects.get()
    assert (row.status, row.attempts, row.last_status_code) == ("pending", 1, None)
    assert row.last_error == "No answer within WEBHOOK_TIMEOUT (0.5 s)"


def test_a_rounds_deliveries_are_attempted_side_by_side(
    user, conversation, hooked, receiver, ask, model, settings
):
    settings.WEBHOOK_TIMEOUT = 0.5
    receiver.trickle = 0.1
    ask(user, conversation)
    model.responses.clear()
    ask(user, services.create_conversation(owner=user, title="Second"))
    assert delivery.deliver_due() == 2
    assert receiver.most_in_flight == 2  # not one after the other


def test_one_users_slow_receivers_take_only_their_share_of_a_round(
    user, other_user, conversation, hooked, receiver, ask, model, settings
):
    """A user whose receivers take their time delays their own deliveries, not everyone's."""
    settings.WEBHOOK_TIMEOUT = 0.5
    settings.WEBHOOK_USER_SHARE = 1
    receiver.trickle = 0.1
    for each in (conversation, *(services.create_conversation(owner=user) for _ in range(2))):
        model.responses.clear()
        ask(user, each)
    theirs = WebhookReceiver()
    try:
        create_webhook(user=other_user, url=theirs.url)
        model.responses.clear()
        ask(other_user, services.create_conversation(owner=other_user))
        assert delivery.deliver_due() == 2  # one of each user's
        assert theirs.answered == [200]
    finally:
        theirs.close()
    attempts = sorted(
        Delivery.objects.values_list("webhook__owner__username", "status", "attempts")
    )
    assert attempts == [
        ("ada", "pending", 0),
        ("ada", "pending", 0),
        ("ada", "pending", 1),  # timed out: retried later
        ("mallory", "delivered", 1),
    ]


def test_an_attempt_that_raises_is_a_failure_to_retry_and_the_round_goes_on(
    user, conversation, hooked, receiver, ask, monkeypatch
):
    async def broken(post):
        raise RuntimeError("a bug in the sender")

    monkeypatch.setattr(sending, "send", broken)
    ask(user, conversation)
    assert delivery.deliver_due() == 1
    row = Delivery.objects.get()
    assert (row.status, row.attempts) == (DeliveryStatus.PENDING, 1)
    assert row.last_error == "RuntimeError: a bug in the sender"


def test_a_slow_attempt_outlives_its_round_and_holds_its_owners_share_meanwhile(
    user, other_user, conversation, hooked, receiver, ask, model, settings
):
    """A round waits WEBHOOK_ROUND_SECONDS for its attempts; one still running goes on, still
    one of its owner's WEBHOOK_USER_SHARE, while other owners' deliveries go out in the next
    rounds; a later round records it once it ends."""
    settings.WEBHOOK_TIMEOUT = 2
    settings.WEBHOOK_ROUND_SECONDS = 0.1
    settings.WEBHOOK_USER_SHARE = 1
    receiver.trickle = 0.1  # the whole answer would take ~4 s
    for each in (conversation, services.create_conversation(owner=user)):
        model.responses.clear()
        ask(user, each)
    assert delivery.deliver_due() == 1  # her first; still running after the round
    assert delivery.deliver_due() == 0  # her second waits for her share
    theirs = WebhookReceiver()
    try:
        create_webhook(user=other_user, url=theirs.url)
        model.responses.clear()
        ask(other_user, services.create_conversation(owner=other_user))
        assert delivery.deliver_due() == 1
        assert theirs.answered == [200]
    finally:
        theirs.close()
    deadline = time.monotonic() + 10
    while not Delivery.objects.filter(webhook__owner=user).exclude(last_error="").exists():
        assert time.monotonic() < deadline, "the slow attempt was never recorded"
        delivery.deliver_due()
    attempts = sorted(
        Delivery.objects.values_list("webhook__owner__username", "attempts", "last_error")
    )
    assert attempts[-1] == ("mallory", 1, "")
    assert ("ada", 1, "No answer within WEBHOOK_TIMEOUT (2 s)") in attempts


def test_one_users_backlog_does_not_hold_back_another_users_deliveries(
    user, other_user, hooked, settings
):
    """However many deliveries one user has due (ten webhooks make ten of each question
    event, and their share of each round drains them slowly), another user's due delivery is
    in the next round: each owner's earliest due are looked at, not the earliest due of all."""
    webhook, _ = hooked
    earlier = timezone.now() - timedelta(minutes=5)
    Delivery.objects.bulk_create(
        Delivery(
            webhook=webhook,
            event_id=f"msg_backlog_{n}",
            event_type="question.asked",
            body="{}",
            next_attempt_at=earlier,
        )
        for n in range(500)
    )
    theirs = WebhookReceiver()
    try:
        their_webhook, _ = create_webhook(user=other_user, url=theirs.url)
        Delivery.objects.create(
            webhook=their_webhook, event_id="msg_theirs", event_type="question.asked", body="{}"
        )
        assert delivery.deliver_due() == settings.WEBHOOK_USER_SHARE + 1
        assert theirs.answered == [200]
    finally:
        theirs.close()
    assert Delivery.objects.get(event_id="msg_theirs").status == DeliveryStatus.DELIVERED


def test_a_failing_receiver_gets_the_same_event_again_later(
    user, conversation, hooked, receiver, clock, ask
):
    _, secret = hooked
    receiver.statuses = [500, 503]
    ask(user, conversation)
    delivery.deliver_due()
    row = Delivery.objects.get()
    assert (row.status, row.attempts, row.last_status_code) == ("pending", 1, 500)
    assert delivery.deliver_due() == 0  # not due before its backoff
    for _ in range(2):
        clock.advance(3600)
        delivery.deliver_due()
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("delivered", 3)
    assert {headers["webhook-id"] for headers, _ in receiver.requests} == {row.event_id}
    for headers, body in receiver.requests:  # each retry signed afresh (at its own timestamp)
        at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
        assert Verifier(secret).sign(row.event_id, at, body) == headers["webhook-signature"]


def test_attempts_are_bounded(settings, user, conversation, hooked, receiver, clock, ask):
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    receiver.statuses = [500] * 5
    ask(user, conversation)
    for _ in range(4):
        delivery.deliver_due()
        clock.advance(3600)
    row = Delivery.objects.get()
    assert (row.status, row.attempts) == ("failed", 2)
    assert len(receiver.requests) == 2


def test_a_private_address_is_refused_at_delivery_time_too(
    settings, user, conversation, hooked, receiver, ask
):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    ask(user, conversation)
    delivery.deliver_due()
    row = Delivery.objects.get()
    assert row.status == "pending" and row.last_error == str(NOT_PUBLIC)
    assert receiver.requests == []


def test_the_delivery_log_is_on_the_settings_page(
    client, user, conversation, hooked, receiver, ask
):
    ask(user, conversation)
    delivery.deliver_due()
    client.force_login(user)
    html = client.get(reverse("webhooks:settings")).content.decode()
    assert "question.asked" in html
    assert "Delivered" in html


def test_an_admin_adds_a_webhook_for_everyone_and_sees_its_secret_once(
    client, django_user_model, resolver
):
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client.force_login(admin)
    response = client.post(
        "/admin/webhooks/webhook/add/", {"url": "https://hooks.example.org/all"}, follow=True
    )
    webhook = Webhook.objects.get()
    assert webhook.owner is None
    assert webhook.secret in response.content.decode()
    refused = client.post("/admin/webhooks/webhook/add/", {"url": "http://10.0.0.1/"})
    assert str(NOT_PUBLIC).replace("'", "&#x27;") in refused.content.decode()
    assert client.get("/admin/webhooks/delivery/").status_code == 200


def test_delivery_connects_to_the_address_it_checked(
    settings, monkeypatch, user, conversation, receiver, ask
):
    """The name is resolved once per attempt, checked, and that address is the one used; the
    request still names the host."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    port = receiver.url.split(":")[2].split("/")[0]
    lookups = []

    def getaddrinfo(host, *args, **kwargs):
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(port)))]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", getaddrinfo)
    create_webhook(user=user, url=f"http://hooks.example.org:{port}/hook")
    ask(user, conversation)
    delivery.deliver_due()
    [(headers, _)] = receiver.requests
    assert headers["host"] == f"hooks.example.org:{port}"
    # The name was looked up at registration and once for the delivery; the connection then
    # went to the address itself (nothing else looked the name up).
    assert [host for host in lookups if host != "127.0.0.1"] == ["hooks.example.org"] * 2
    assert Delivery.objects.get().status == "delivered"


def test_a_receiver_that_answers_410_gone_disables_its_webhook(
    settings, user, conversation, hooked, receiver, clock, ask, model
):
    """410 Gone asks for no more deliveries: the webhook is disabled, what waited for it is
    given up without an attempt, and no new event is queued for it."""
    settings.WEBHOOK_USER_SHARE = 1  # one attempt this round; the second event waits
    receiver.statuses = [410]
    ask(user, conversation)
    model.responses.clear()
    ask(user, services.create_conversation(owner=user))
    assert delivery.deliver_due() == 1
    webhook = Webhook.objects.get()
    assert webhook.disabled_at is not None and webhook.disabled_reason == "gone"
    attempted, waiting = Delivery.objects.order_by("id")
    assert (attempted.status, attempted.attempts, attempted.last_status_code) == ("failed", 1, 410)
    assert (waiting.status, waiting.attempts) == ("given_up", 0)
    clock.advance(24 * 3600)
    assert delivery.deliver_due() == 0
    model.responses.clear()
    ask(user, services.create_conversation(owner=user))
    assert Delivery.objects.count() == 2  # nothing queued for the disabled webhook
    assert len(receiver.requests) == 1


def test_a_delivery_in_flight_when_its_webhook_is_disabled_is_still_recorded(
    user, conversation, hooked, ask, model
):
    """Two attempts of a round went side by side: the one recorded first got 410 Gone, which
    gave up the other; but that one reached its receiver, and the log says so."""
    ask(user, conversation)
    model.responses.clear()
    ask(user, services.create_conversation(owner=user))
    gone, reached = Delivery.objects.select_related("webhook").order_by("id")
    delivery.record(gone, status_code=410, error="HTTP 410")
    assert Delivery.objects.get(pk=reached.pk).status == "given_up"
    delivery.record(reached, status_code=200, error="")
    outcomes = list(Delivery.objects.order_by("id").values_list("status", "last_status_code"))
    assert outcomes == [("failed", 410), ("delivered", 200)]
    assert Webhook.objects.get().disabled_reason == "gone"


def test_the_owner_sees_why_a_webhook_is_disabled_and_enables_it_again(
    client, user, conversation, hooked, receiver, ask, model
):
    receiver.statuses = [410]
    ask(user, conversation)
    delivery.deliver_due()
    webhook = Webhook.objects.get()
    client.force_login(user)
    html = client.get(reverse("webhooks:settings")).content.decode()
    assert "Disabled since" in html and "answered 410 Gone" in html
    assert "Not sent: webhook disabled" not in html  # nothing else was waiting
    assert f'action="{reverse("webhooks:enable", args=[webhook.pk])}"' in html

    page = client.post(reverse("webhooks:enable", args=[webhook.pk]), follow=True)
    html = page.content.decode()
    assert "The webhook is enabled again" in html and "Disabled since" not in html
    webhook.refresh_from_db()
    assert (webhook.disabled_at, webhook.disabled_reason) == (None, "")
    model.responses.clear()
    ask(user, services.create_conversation(owner=user))
    assert delivery.deliver_due() == 1
    assert Delivery.objects.filter(status="delivered").count() == 1


def test_the_settings_page_is_translated_for_a_disabled_webhook(
    client, user, conversation, hooked, receiver, ask
):
    receiver.statuses = [410]
    ask(user, conversation)
    delivery.deliver_due()
    client.force_login(user)
    client.cookies["django_language"] = "pt-br"
    html = client.get(reverse("webhooks:settings")).content.decode()
    assert "Disabled since" not in html and "Enable again" not in html
    assert "410 Gone" in html


def test_only_the_owner_can_enable_a_webhook_again(client, user, other_user, resolver):
    webhook, _ = create_webhook(user=user, url="https://hooks.example.org/p")
    webhook_services.disable_webhook(webhook_id=webhook.pk, reason=DisabledReason.GONE)
    url = reverse("webhooks:enable", args=[webhook.pk])
    client.force_login(other_user)
    assert client.post(url).status_code == 404
    client.force_login(user)
    assert client.get(url).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(url).status_code == 403
    assert client.post(reverse("webhooks:enable", args=[webhook.pk + 1000])).status_code == 404
    assert Webhook.objects.get().disabled_at is not None


def test_the_admin_lists_disabled_webhooks_and_enables_them_again(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client.force_login(admin)
    gone = Webhook.objects.create(url="https://gone.example.org/", secret="whsec_AAAA")
    Webhook.objects.create(url="https://fine.example.org/", secret="whsec_AAAA")
    webhook_services.disable_webhook(webhook_id=gone.pk, reason=DisabledReason.GONE)
    html = client.get("/admin/webhooks/webhook/?disabled=yes").content.decode()
    assert "gone.example.org" in html and "fine.example.org" not in html
    assert "answered 410 Gone" in html
    client.post(
        "/admin/webhooks/webhook/", {"action": "enable_again", "_selected_action": [gone.pk]}
    )
    assert not Webhook.objects.filter(disabled_at__isnull=False).exists()


def test_the_cached_owners_follow_each_webhook_made_disabled_or_enabled(
    settings, user, other_user, conversation, ask, receiver, model
):
    """Which owners have a webhook is read once and kept (an event nobody's webhook wants
    queues nothing, with no query); every change is seen by the next event."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    create_webhook(user=other_user, url=receiver.url)  # someone else's: the owners are known
    ask(user, conversation)
    assert not Delivery.objects.exists()

    def next_event():
        model.responses.clear()
        ask(user, services.create_conversation(owner=user))
        return Delivery.objects.filter(webhook__owner=user).count()

    webhook, _ = create_webhook(user=user, url=receiver.url)
    assert next_event() == 1
    webhook_services.disable_webhook(webhook_id=webhook.pk, reason=DisabledReason.GONE)
    assert next_event() == 1
    webhook_services.enable_webhook(user=user, webhook_id=webhook.pk)
    assert next_event() == 2
    webhook_services.delete_webhook(user=user, webhook_id=webhook.pk)
    assert next_event() == 0
