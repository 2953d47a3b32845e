"""The user's live channel (questions.consumers), the inbox page and the header's count."""

import re

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.urls import reverse

from chat import services
from chat.engine.providers.base import ToolCallRequest
from chat.models import AgentState
from chat.routing import websocket_urlpatterns as conversation_websockets
from config.asgi import application
from core import events
from questions import consumers as live
from questions import resolving as questions
from questions.errors import QuestionAlreadyResolved
from questions.payloads import Answer
from questions.routing import websocket_urlpatterns
from questions.selectors import pending_questions_for_user
from tests.fakes import PIZZA

pytestmark = pytest.mark.django_db

# The consumers read the database on threads of their own: what they read must be committed.
consumer_test = pytest.mark.django_db(transaction=True)

db = database_sync_to_async
HTMX = {"HX-Request": "true"}
# What a browser on http://127.0.0.1:8000 sends: the origin is checked against this host.
HOST = (b"host", b"127.0.0.1:8000")


def ask(user, conversation, model, call_id="q1"):
    """The conversation's next turn asks PIZZA (the model's other canned replies wait); in a
    test that rolls back, inside `committed()`, for the turn to run."""
    model.responses.insert(0, [ToolCallRequest(call_id, "question", PIZZA)])
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")


def count(html):
    return int(re.search(r'id="live-state" hidden data-count="(\d+)"', html).group(1))


def inbox_keys(html):
    return re.findall(r'<li class="inbox-item" id="inbox-([\w-]+)"', html)


async def connect_as(user, path="/ws/me/"):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return communicator, connected


async def answer_funghi(user, conversation) -> None:
    """The user answers the question `ask` asked (q1) with Funghi."""
    await db(questions.answer_question)(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
    )


# --- Selectors ------------------------------------------------------------------------------


def test_pending_questions_are_the_users_own_newest_first(user, other_user, model, committed):
    first = services.create_conversation(owner=user, title="First")
    second = services.create_conversation(owner=user, title="Second")
    theirs = services.create_conversation(owner=other_user, title="Theirs")
    for owner, conversation in [(user, first), (user, second), (other_user, theirs)]:
        with committed():
            ask(owner, conversation, model)
    # Renaming the older one makes it the most recently active, not the most recently asked.
    services.rename_conversation(user=user, conversation_id=first.pk, title="First, renamed")
    pending = pending_questions_for_user(user=user)
    assert [q.conversation_id for q in pending] == [second.pk, first.pk]
    assert pending[1].conversation.title == "First, renamed"
    assert pending[0].key == f"{second.pk}-q1"


# --- Events ---------------------------------------------------------------------------------


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:
    """What is sent to users' live channels from now on (after commit): (group, event)."""
    to_attention: list[tuple[str, dict]] = []

    def send(group, event):
        if group.startswith("attention."):
            to_attention.append((group, event))

    monkeypatch.setattr(events, "send", send)
    return to_attention


def test_asking_and_answering_tell_the_users_live_channels(
    user, conversation, model, committed, sent
):
    with committed():
        ask(user, conversation, model)
    group = f"attention.{user.pk}"
    asked = (group, events.attention_changed(user.pk, conversation.pk, waiting=True))
    ended = (group, events.attention_changed(user.pk, conversation.pk))
    assert asked[1]["waiting"] and not ended[1]["waiting"]
    assert sent == [asked]
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    assert sent == [asked, ended]
    with committed():
        ask(user, conversation, model, call_id="q2")
    with committed():
        questions.reject_question(user=user, conversation_id=conversation.pk, tool_call_id="q2")
    assert sent == [asked, ended, asked, ended]


def test_deleting_a_waiting_conversation_tells_the_users_live_channels(
    user, conversation, model, committed, sent
):
    with committed():
        ask(user, conversation, model)
    sent.clear()
    with committed():
        services.delete_conversation(user=user, conversation_id=conversation.pk)
    assert sent == [(f"attention.{user.pk}", events.attention_changed(user.pk, conversation.pk))]


# --- The consumer ---------------------------------------------------------------------------


@consumer_test
async def test_the_channel_pushes_the_count_when_questions_come_and_go(user, conversation, model):
    communicator, connected = await connect_as(user)
    assert connected
    html = await communicator.receive_from()
    assert count(html) == 0
    assert 'href="/questions/" hx-swap-oob="true">Questions</a>' in html
    assert "inbox-incoming" not in html

    await db(ask)(user, conversation, model)
    html = await communicator.receive_from()
    assert count(html) == 1
    assert 'Questions <span class="questions-count">1</span></a>' in html
    assert f'data-url="/c/{conversation.pk}/#question-q1"' in html
    assert "First chat: Pizza" in html

    await answer_funghi(user, conversation)
    assert count(await communicator.receive_from()) == 0
    await communicator.disconnect()


@consumer_test
async def test_on_the_inbox_the_channel_pushes_every_pending_item(user, conversation, model):
    communicator, _ = await connect_as(user, "/ws/me/?inbox=1")
    assert inbox_keys(await communicator.receive_from()) == []
    await db(ask)(user, conversation, model)
    html = await communicator.receive_from()
    assert '<div id="inbox-incoming" hx-swap-oob="true" hidden><template>' in html
    assert inbox_keys(html) == [f"{conversation.pk}-q1"]
    assert 'role="group" aria-label="Pizza"' in html
    assert '<input type="hidden" name="from" value="inbox">' in html
    await communicator.disconnect()


@consumer_test
async def test_a_reminder_is_pushed_for_a_pending_question_only(user, conversation, model):
    communicator, _ = await connect_as(user)
    await communicator.receive_from()
    await db(ask)(user, conversation, model)
    await communicator.receive_from()
    reminder = {
        "type": "questions.reminder",
        "conversation_id": conversation.pk,
        "tool_call_id": "q1",
        "expires_at": "2026-11-26T09:00:00+00:00",
    }
    await get_channel_layer(events.EVENTS_LAYER).group_send(
        events.attention_group(user.pk), reminder
    )
    html = await communicator.receive_from()
    assert 'id="live-reminder"' in html and 'hx-swap-oob="true"' in html
    assert f'data-key="reminder-{conversation.pk}-q1"' in html
    assert 'data-title="A question expires soon"' in html
    assert "First chat: Pizza" in html
    # Answered since: nothing to remind of.
    await answer_funghi(user, conversation)
    await communicator.receive_from()
    await get_channel_layer(events.EVENTS_LAYER).group_send(
        events.attention_group(user.pk), reminder
    )
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


@consumer_test
async def test_a_new_question_is_pushed_at_once_and_ended_waits_together_later(
    user, conversation, model, monkeypatch
):
    """Each push is the whole state: waits that end within ATTENTION_DELAY_SECONDS of each
    other go out as one push, that long later (after the answer's own pushes to its
    conversation); a new question does not wait; a later change gets its own push."""
    monkeypatch.setattr(live, "ATTENTION_DELAY_SECONDS", 2.0)
    communicator, _ = await connect_as(user)
    await communicator.receive_from()
    await db(ask)(user, conversation, model)
    assert count(await communicator.receive_from(timeout=1)) == 1  # not 2 s later
    layer = get_channel_layer(events.EVENTS_LAYER)
    for _ in range(3):
        await layer.group_send(
            events.attention_group(user.pk), events.attention_changed(user.pk, conversation.pk)
        )
    assert await communicator.receive_nothing(timeout=1)
    assert count(await communicator.receive_from(timeout=3)) == 1
    assert await communicator.receive_nothing(timeout=0.5)

    monkeypatch.setattr(live, "ATTENTION_DELAY_SECONDS", 0.1)
    await answer_funghi(user, conversation)
    assert count(await communicator.receive_from()) == 0
    await communicator.disconnect()


@consumer_test
async def test_another_users_questions_are_not_pushed(user, other_user, model):
    theirs = await db(services.create_conversation)(owner=other_user, title="Theirs")
    communicator, _ = await connect_as(user)
    await communicator.receive_from()
    await db(ask)(other_user, theirs, model)
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_anonymous_is_refused():
    _, connected = await connect_as(AnonymousUser())
    assert not connected


@consumer_test
async def test_attention_events_reach_the_live_channel_and_not_the_conversation_sockets(
    user, conversation, model
):
    """A user's many conversation sockets do nothing with these: they are not woken by them."""
    live, _ = await connect_as(user)
    await live.receive_from()
    page = WebsocketCommunicator(
        URLRouter(conversation_websockets), f"/ws/conversations/{conversation.pk}/"
    )
    page.scope["user"] = user
    assert (await page.connect())[0]
    await page.send_json_to({"type": "sync", "after": conversation.seq})  # nothing to catch up
    layer = get_channel_layer(events.EVENTS_LAYER)
    for event in (
        events.attention_changed(user.pk, conversation.pk),
        {"type": "questions.reminder", "conversation_id": conversation.pk, "tool_call_id": "q1"},
    ):
        await layer.group_send(events.attention_group(user.pk), event)
    assert count(await live.receive_from()) == 0  # the attention push; no question, no reminder
    assert await page.receive_nothing(timeout=0.3)
    # The page still serves what follows.
    await db(ask)(user, conversation, model)
    html = await page.receive_from()
    while "Which pizza?" not in html:
        html = await page.receive_from()
    await page.disconnect()
    await live.disconnect()


@consumer_test
@pytest.mark.parametrize(
    "event",
    [
        {"type": "attention.changed", "user_id": 0, "conversation_id": 0, "waiting": False},
        {"type": "questions.reminder", "conversation_id": 0, "tool_call_id": "q1"},
        {"type": "chat.from_a_later_release", "conversation_id": 0},
    ],
)
async def test_a_page_ignores_events_it_has_no_handler_for(user, conversation, model, event):
    """Another release's process may send events this one does not handle to the user group
    (during a rolling upgrade), where every conversation socket of the user hears them: a page
    ignores them and still serves what follows."""
    page = WebsocketCommunicator(
        URLRouter(conversation_websockets), f"/ws/conversations/{conversation.pk}/"
    )
    page.scope["user"] = user
    assert (await page.connect())[0]
    await page.send_json_to({"type": "sync", "after": conversation.seq})
    await get_channel_layer(events.EVENTS_LAYER).group_send(events.user_group(user.pk), event)
    await db(ask)(user, conversation, model)
    html = await page.receive_from()
    while "Which pizza?" not in html:
        html = await page.receive_from()
    await page.disconnect()


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def real_socket(client: Client | None, *, origin=b"http://127.0.0.1:8000", cookies=""):
    """The channel through the whole ASGI stack (origin check, session auth), as a browser on
    http://127.0.0.1:8000 opens it with `client`'s session."""
    headers = [HOST]
    if origin:
        headers.append((b"origin", origin))
    if client is not None:
        headers.append(
            (b"cookie", f"sessionid={client.cookies['sessionid'].value}{cookies}".encode())
        )
    return WebsocketCommunicator(application, "/ws/me/", headers=headers)


@consumer_test
@pytest.mark.parametrize(
    ("origin", "with_session", "accepted"),
    [
        (b"http://127.0.0.1:8000", True, True),
        (b"http://evil.example", True, False),
        (b"http://127.0.0.1:9999", True, False),
        (None, True, False),
        (b"http://127.0.0.1:8000", False, False),
    ],
)
async def test_the_real_stack_checks_origin_and_session(user, origin, with_session, accepted):
    client = await db(signed_in)(user) if with_session else None
    communicator = real_socket(client, origin=origin)
    connected, _ = await communicator.connect()
    assert connected is accepted
    if connected:
        await communicator.disconnect()


@consumer_test
async def test_signing_out_closes_the_channel(user):
    client = await db(signed_in)(user)
    communicator = real_socket(client)
    assert (await communicator.connect())[0]
    await communicator.receive_from()
    await db(client.logout)()
    assert await communicator.receive_output(timeout=1) == {
        "type": "websocket.close",
        "code": 4401,
    }


@consumer_test
async def test_pushes_follow_the_language_cookie(user):
    communicator = real_socket(await db(signed_in)(user), cookies="; django_language=pt-br")
    assert (await communicator.connect())[0]
    assert ">Perguntas</a>" in await communicator.receive_from()
    await communicator.disconnect()


# --- Pages ----------------------------------------------------------------------------------


@pytest.fixture
def asked(client, user, conversation, model, committed):
    client.force_login(user)
    with committed():
        ask(user, conversation, model)
    return conversation


def test_every_page_has_the_questions_link_with_the_count(client, asked):
    for url in [reverse("chat:conversation_list"), reverse("accounts:preferences")]:
        html = client.get(url).content.decode()
        assert 'Questions <span class="questions-count">1</span></a>' in html
        assert 'ws-connect="/ws/me/"' in html


def test_the_inbox_lists_pending_questions_with_a_link_to_each(
    client, user, asked, model, committed
):
    other = services.create_conversation(owner=user, title="Second chat")
    with committed():
        ask(user, other, model, call_id="q9")
    html = client.get(reverse("questions:inbox")).content.decode()
    assert inbox_keys(html) == [f"{other.pk}-q9", f"{asked.pk}-q1"]
    assert f'href="/c/{asked.pk}/#question-q1">First chat</a>' in html
    assert 'ws-connect="/ws/me/?inbox=1"' in html
    assert 'id="inbox-empty" class="empty" hidden' in html


def test_the_inbox_is_empty_when_nothing_waits(client, user):
    client.force_login(user)
    html = client.get(reverse("questions:inbox")).content.decode()
    assert inbox_keys(html) == []
    assert "No questions are waiting for you." in html
    assert 'id="inbox-empty" class="empty">' in html


def test_answering_from_the_inbox_takes_the_item_off_the_list(client, asked, committed):
    url = reverse("questions:answer", args=[asked.pk, "q1"])
    with committed():
        response = client.post(url, {"q0": "Funghi", "from": "inbox"}, headers=HTMX)
    assert response.status_code == 200
    assert f'<div id="inbox-{asked.pk}-q1" hx-swap-oob="delete"></div>' in response.content.decode()
    asked.refresh_from_db()
    assert asked.agent_state == AgentState.IDLE
    # Refused (already answered): shown in the block's alert, as on the conversation page.
    again = client.post(url, {"q0": "Funghi", "from": "inbox"}, headers=HTMX)
    assert again.status_code == 409
    assert (again["HX-Retarget"], again["HX-Reswap"]) == ("#question-q1-alert", "innerHTML")
    assert again.content.decode() == str(QuestionAlreadyResolved.default_message)


def test_rejecting_from_the_inbox_without_javascript_returns_to_the_inbox(client, asked):
    url = reverse("questions:reject", args=[asked.pk, "q1"])
    response = client.post(url, {"from": "inbox"})
    assert response["Location"] == reverse("questions:inbox")
    asked.refresh_from_db()
    assert asked.agent_state == AgentState.IDLE


def test_another_users_question_cannot_be_answered_from_the_inbox(client, other_user, asked):
    client.force_login(other_user)
    url = reverse("questions:answer", args=[asked.pk, "q1"])
    assert client.post(url, {"q0": "Funghi", "from": "inbox"}, headers=HTMX).status_code == 404
    assert inbox_keys(client.get(reverse("questions:inbox")).content.decode()) == []
