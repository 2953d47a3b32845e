"""Limits per user and login throttling: refusals are 429 with
Retry-After, a JSON message in the API and a visible alert in the page."""

import re

import pytest
from django.test import Client

from api.tokens import create_token
from chat import services
from chat.errors import TooManyRunningTurns
from core import limits
from core.errors import TooManyMessages, TooManyStreams

# Also run on PostgreSQL (make test): the running-turns limit locks the user's row.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

HTMX = {"HX-Request": "true"}


def bearer(user) -> dict:
    return {"Authorization": f"Bearer {create_token(user=user, name='t')[1]}"}


def test_messages_per_minute_refused_with_429_in_api_and_page(
    client, user, settings, one_minute, committed
):
    settings.PARLEY_MESSAGES_PER_MINUTE = 2
    conversation = services.create_conversation(owner=user)
    path = f"/api/v1/conversations/{conversation.pk}/messages"
    headers = bearer(user)
    for _ in range(2):
        with committed():  # each reply is done before the next message
            ok = client.post(
                path, {"content": "hi"}, content_type="application/json", headers=headers
            )
        assert ok.status_code == 200
    refused = client.post(path, {"content": "hi"}, content_type="application/json", headers=headers)
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 61
    assert "too many messages" in refused.json()["message"]

    # The person who acted sees it where they typed, and keeps their text.
    client.force_login(user)
    page = client.post(f"/c/{conversation.pk}/messages/", {"text": "again"}, headers=HTMX)
    assert page.status_code == 429
    assert page["Retry-After"]
    html = page.content.decode()
    assert re.search(r'role="alert">You sent too many messages in a minute', html)
    assert ">again</textarea>" in html


def test_running_turns_at_once_are_limited(client, user, settings, committed, dispatched):
    settings.PARLEY_MAX_RUNNING_TURNS = 1
    first = services.create_conversation(owner=user)
    second = services.create_conversation(owner=user)
    with committed():
        services.post_user_message(user=user, conversation_id=first.pk, text="go")
    with pytest.raises(TooManyRunningTurns):
        services.post_user_message(user=user, conversation_id=second.pk, text="go")
    response = client.post(
        f"/api/v1/conversations/{second.pk}/messages",
        {"content": "go"},
        content_type="application/json",
        headers=bearer(user),
    )
    assert response.status_code == 429
    assert response["Retry-After"] == "5"
    assert "already replying" in response.json()["message"]
    assert dispatched == [first.pk]


def test_another_users_limits_are_their_own(user, other_user, settings, one_minute):
    settings.PARLEY_MESSAGES_PER_MINUTE = 1
    mine = services.create_conversation(owner=user)
    theirs = services.create_conversation(owner=other_user)
    services.post_user_message(user=user, conversation_id=mine.pk, text="one")
    services.post_user_message(user=other_user, conversation_id=theirs.pk, text="one")
    with pytest.raises(TooManyMessages):
        services.post_user_message(user=user, conversation_id=mine.pk, text="two")


def test_conversations_per_minute_refused_in_api_and_page(client, user, settings, one_minute):
    settings.PARLEY_CONVERSATIONS_PER_MINUTE = 1
    headers = bearer(user)
    created = client.post("/api/v1/conversations", {}, "application/json", headers=headers)
    assert created.status_code == 201
    refused = client.post("/api/v1/conversations", {}, "application/json", headers=headers)
    assert refused.status_code == 429
    assert refused["Retry-After"]
    assert "too many conversations" in refused.json()["message"]

    client.force_login(user)
    page = client.post("/conversations/new/", {"text": "Hello"})
    assert page.status_code == 429
    assert re.search(r'role="alert">You started too many conversations', page.content.decode())


def test_open_event_streams_are_limited_and_given_back(client, user, settings):
    settings.PARLEY_MAX_STREAMS = 1
    conversation = services.create_conversation(owner=user)
    held = limits.StreamSlot(user.pk)
    with pytest.raises(TooManyStreams):
        limits.StreamSlot(user.pk)
    refused = client.get(f"/api/v1/conversations/{conversation.pk}/events", headers=bearer(user))
    assert refused.status_code == 429
    assert "at most 1" in refused.json()["message"]
    held.release()
    held.release()  # twice changes nothing
    limits.StreamSlot(user.pk).release()


def log_in(client, username, password):
    return client.post("/login/", {"username": username, "password": password})


def test_login_is_locked_per_account_after_failures_and_the_lock_expires(
    user, settings, monkeypatch
):
    settings.PARLEY_LOGIN_FAILURES_PER_ACCOUNT = 3
    settings.PARLEY_LOGIN_LOCKOUT_SECONDS = 300
    attacker = Client(REMOTE_ADDR="10.0.0.9")
    for _ in range(3):
        assert log_in(attacker, "ada", "wrong").status_code == 200
    locked = log_in(attacker, "ada", "pw-ada-123")  # the right password, while locked
    assert locked.status_code == 429
    assert 1 <= int(locked["Retry-After"]) <= 300
    assert re.search(r'role="alert"><p>Too many failed logins', locked.content.decode())
    # From another address too: the account is what is locked.
    assert log_in(Client(REMOTE_ADDR="10.0.0.10"), "ADA ", "pw-ada-123").status_code == 429

    # The lock expires (and attempts while locked did not extend it).
    now = limits.time.time()
    monkeypatch.setattr(limits.time, "time", lambda: now + 301)
    assert log_in(Client(REMOTE_ADDR="10.0.0.10"), "ada", "pw-ada-123").status_code == 302


def test_a_known_device_is_not_locked_out_by_someone_elses_failures(user, settings):
    settings.PARLEY_LOGIN_FAILURES_PER_ACCOUNT = 3
    owner = Client(REMOTE_ADDR="10.0.0.1")
    assert log_in(owner, "ada", "pw-ada-123").status_code == 302
    device = owner.cookies["parley_device"].value
    owner.logout()  # the test client forgets every cookie here; a browser keeps this one
    owner.cookies["parley_device"] = device
    attacker = Client(REMOTE_ADDR="10.0.0.9")
    for _ in range(4):
        log_in(attacker, "ada", "wrong")
    assert log_in(attacker, "ada", "pw-ada-123").status_code == 429
    assert log_in(owner, "ada", "pw-ada-123").status_code == 302


def test_login_is_locked_per_address_across_accounts(user, other_user, settings):
    settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS = 4
    guesser = Client(REMOTE_ADDR="10.0.0.7")
    for name in ["ada", "mallory", "ada", "mallory"]:
        assert log_in(guesser, name, "wrong").status_code == 200
    assert log_in(guesser, "mallory", "pw-mallory-123").status_code == 429
    assert log_in(Client(REMOTE_ADDR="10.0.0.8"), "mallory", "pw-mallory-123").status_code == 302
