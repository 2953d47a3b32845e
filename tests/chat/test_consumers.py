"""The conversation websocket (chat.live.consumers): a tab that says which change it has
gets everything after it, then each change as it comes; it closes when the conversation is
deleted or the session that opened it ends.

The socket tests are committed for real: the consumer reads the database on a thread of its
own (Channels' database_sync_to_async), which a test that rolls back would not show its data.
"""

import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.test import Client

from chat import services
from chat.blocks import TextBlock
from chat.errors import ConversationNotFound
from chat.live import sessions
from chat.models import AgentState, Role
from chat.routing import websocket_urlpatterns
from chat.selectors import PAGE_MESSAGES
from chat.transcript import Transcript, lock
from config.asgi import application
from tests.factories import add_message, fail_turn, set_state, tab_on

pytestmark = pytest.mark.django_db(transaction=True)

db = database_sync_to_async


def ws_path(conversation_id):
    return f"/ws/conversations/{conversation_id}/"


async def connect_as(user, conversation_id):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), ws_path(conversation_id))
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return communicator, connected


def message_ids(html):
    return re.findall(r'<li id="message-(\d+)"', html)


def appended(html):
    return re.findall(r'<div hx-swap-oob="beforeend:#transcript">\s*<li id="message-(\d+)"', html)


def cursor(html):
    return int(re.search(r'id="sync-cursor" value="(\d+)"', html).group(1))


def say(conversation_id, text, message_id=None):
    return db(add_message)(conversation_id, text, message_id=message_id)


async def test_sync_sends_everything_after_the_cursor_then_streams_live(user, conversation):
    first = await say(conversation.pk, "one")
    communicator, connected = await connect_as(user, conversation.pk)
    assert connected
    await communicator.send_json_to({"type": "sync", "after": 0})
    html = await communicator.receive_from()
    assert appended(html) == [str(first)]
    assert cursor(html) == 1

    second = await say(conversation.pk, "two")
    html = await communicator.receive_from()
    assert appended(html) == [str(second)]
    assert ">two<" in html

    await say(conversation.pk, "two, longer", message_id=second)
    html = await communicator.receive_from()
    assert appended(html) == []
    replaced = f'<li id="message-{second}" class="message message-assistant" data-version="2"'
    assert f'{replaced} hx-swap-oob="true">' in html
    assert "two, longer" in html
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_reconnect_catches_up_without_gaps_or_duplicates(user, conversation):
    first = await say(conversation.pk, "one")
    second = await say(conversation.pk, "two")
    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": 0})
    seen = cursor(await communicator.receive_from())
    await communicator.disconnect()

    # While the page is away: one message changes, one is added.
    await say(conversation.pk, "two, edited", message_id=second)
    third = await say(conversation.pk, "three")

    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": seen})
    html = await communicator.receive_from()
    assert str(first) not in message_ids(html)
    assert message_ids(html) == [str(second), str(third)]
    assert appended(html) == [str(third)]
    assert cursor(html) == 4
    assert await communicator.receive_nothing()
    await communicator.disconnect()


def many(conversation_id: int, count: int) -> list[int]:
    with transaction.atomic(), Transcript(lock(conversation_id)) as transcript:
        return [
            transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text=f"m{index}")]).pk
            for index in range(count)
        ]


async def test_a_tab_too_far_behind_gets_the_newest_page_in_place_of_its_transcript(
    user, conversation
):
    await say(conversation.pk, "seen")
    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": 0})
    seen = cursor(await communicator.receive_from())
    await communicator.disconnect()

    ids = await db(many)(conversation.pk, PAGE_MESSAGES + 50)  # missed while away

    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": seen})
    html = await communicator.receive_from()
    assert '<ol id="transcript" class="transcript"' in html and 'hx-swap-oob="true"' in html
    assert message_ids(html) == [str(pk) for pk in ids[-PAGE_MESSAGES:]]
    assert "Load earlier messages" in html
    assert cursor(html) == seen + PAGE_MESSAGES + 50
    # From there on, changes come one by one again.
    last = await say(conversation.pk, "after the page")
    assert appended(await communicator.receive_from()) == [str(last)]
    await communicator.disconnect()


async def test_a_sync_at_the_latest_cursor_sends_nothing(user, conversation):
    await say(conversation.pk, "one")
    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": 1})
    assert await communicator.receive_nothing()
    await communicator.disconnect()


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        '{"type": "sync"}',
        '{"after": "x"}',
        "[]",
        "{}",
        '{"type": "sync", "after": 1e999}',
    ],
)
async def test_garbage_from_the_client_is_ignored(user, conversation, payload):
    await say(conversation.pk, "one")
    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_to(text_data=payload)
    assert await communicator.receive_nothing()
    await communicator.send_json_to({"type": "sync", "after": 0})
    assert "sync-cursor" in await communicator.receive_from()
    await communicator.disconnect()


async def pushed_until(communicator, text: str) -> str:
    """The pushes a tab receives until one shows `text` (a change made in several commits
    may reach it in several pushes): that last push."""
    while text not in (html := await communicator.receive_from(timeout=5)):
        pass
    return html


async def test_state_changes_are_pushed(user, conversation):
    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": 0})
    await db(fail_turn)(conversation.pk)
    html = await pushed_until(communicator, ">Retry</button>")
    assert "The agent could not finish its reply" in html
    await communicator.disconnect()


async def test_deleting_the_conversation_closes_open_sockets(user, conversation):
    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": 0})
    await db(services.delete_conversation)(user=user, conversation_id=conversation.pk)
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4404}


async def test_another_users_conversation_is_refused(other_user, conversation):
    _, connected = await connect_as(other_user, conversation.pk)
    assert not connected


async def test_anonymous_is_refused(conversation):
    _, connected = await connect_as(AnonymousUser(), conversation.pk)
    assert not connected


# What a browser on http://127.0.0.1:8000 sends: the origin is checked against this host.
HOST = (b"host", b"127.0.0.1:8000")


async def signed_in_socket(client, conversation_id):
    """A websocket through the real stack, on the session `client` is signed in with."""
    headers = [
        HOST,
        (b"origin", b"http://127.0.0.1:8000"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    communicator = WebsocketCommunicator(application, ws_path(conversation_id), headers=headers)
    assert (await communicator.connect())[0]
    return communicator


def session_cookie(user):
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.mark.parametrize(
    ("origin", "with_session", "accepted"),
    [
        (b"http://127.0.0.1:8000", True, True),
        (b"http://evil.example", True, False),
        # The same host on another port or scheme is another origin.
        (b"http://127.0.0.1:9999", True, False),
        (b"https://127.0.0.1:8000", True, False),
        (b"http://127.0.0.1:8000/", True, True),
        (b"null", True, False),
        (None, True, False),
        (b"http://127.0.0.1:8000", False, False),
    ],
)
async def test_the_real_stack_checks_origin_and_session(
    user, conversation, origin, with_session, accepted
):
    headers = [HOST]
    if origin:
        headers.append((b"origin", origin))
    if with_session:
        cookie = await db(session_cookie)(user)
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, ws_path(conversation.pk), headers=headers)
    connected, _ = await communicator.connect()
    assert connected is accepted
    if connected:
        await communicator.disconnect()


async def test_pushes_follow_the_language_cookie(user, conversation):
    headers = [
        HOST,
        (b"origin", b"http://127.0.0.1:8000"),
        (b"cookie", f"sessionid={await db(session_cookie)(user)}; django_language=pt-br".encode()),
    ]
    communicator = WebsocketCommunicator(application, ws_path(conversation.pk), headers=headers)
    assert (await communicator.connect())[0]
    await communicator.send_json_to({"type": "sync", "after": 0})
    await db(fail_turn)(conversation.pk)
    html = await pushed_until(communicator, "Tentar de novo")
    assert "Retry" not in html
    await communicator.disconnect()


async def test_a_signed_out_user_stops_receiving_updates(user, conversation):
    client = Client()
    await db(client.force_login)(user)
    communicator = await signed_in_socket(client, conversation.pk)
    await say(conversation.pk, "one")
    await communicator.send_json_to({"type": "sync", "after": 0})
    assert "sync-cursor" in await communicator.receive_from()

    await db(client.logout)()
    await say(conversation.pk, "two")
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}


@pytest.mark.parametrize("change", ["password", "deactivate", "logout"])
async def test_auth_changes_close_the_socket_at_once_through_the_user_group(
    user, conversation, monkeypatch, change
):
    """The `auth.changed` event, not the periodic re-check, closes the socket."""
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 3600)
    client = Client()
    await db(client.force_login)(user)
    communicator = await signed_in_socket(client, conversation.pk)
    # A good read of the session, which the process's other sockets of it would take: the
    # event reads the session afresh all the same.
    await db(sessions.session_reads.read)(client.session.session_key)

    def act():
        if change == "password":
            user.set_password("another-pw-456")
            user.save()
        elif change == "deactivate":
            user.is_active = False
            user.save(update_fields=["is_active"])
        else:
            client.logout()

    await db(act)()
    assert await communicator.receive_output(timeout=1) == {
        "type": "websocket.close",
        "code": 4401,
    }


def test_the_sockets_of_a_session_in_a_process_share_one_read_of_it_a_beat(monkeypatch):
    reads = []
    monkeypatch.setattr(sessions, "session_user_id", lambda key: reads.append(key) or 7)
    shared = sessions.SessionReads()
    first = shared.read("a-session")
    assert shared.recent("a-session") == first  # what another socket of it takes
    assert shared.recent("another-session") is None
    assert reads == ["a-session"]
    later = first[0] + sessions.AUTH_RECHECK_SECONDS
    monkeypatch.setattr(sessions.time, "monotonic", lambda: later)
    assert shared.recent("a-session") is None  # a beat old: read again


async def test_a_sign_in_elsewhere_does_not_close_the_socket(user, conversation, monkeypatch):
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 3600)  # the next push reads it
    client = Client()
    await db(client.force_login)(user)
    communicator = await signed_in_socket(client, conversation.pk)
    await say(conversation.pk, "Signed in")
    await communicator.send_json_to({"type": "sync", "after": 0})
    assert "sync-cursor" in await communicator.receive_from()
    elsewhere = Client()
    await db(elsewhere.force_login)(user)  # saves last_login only
    await db(elsewhere.logout)()  # its auth.changed names that other session
    # This tab's last read of its session is stale now: the push of the next change, which
    # comes after the logout's event, reads the session again and finds it still signed in.
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 0)
    await say(conversation.pk, "Still signed in here")
    assert "Still signed in here" in await communicator.receive_from()
    await communicator.disconnect()


async def test_every_quiet_socket_of_an_ended_session_closes_without_its_event(
    user, conversation, monkeypatch, no_auth_events
):
    """Without its `auth.changed` event (a dropped event), an ended session still closes each
    socket it opened, pushed to lately or not, once its last read of the session is
    AUTH_RECHECK_SECONDS old."""
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 0.5)
    client = Client()
    await db(client.force_login)(user)
    quiet, pushed = [await signed_in_socket(client, conversation.pk) for _ in range(2)]
    await pushed.send_json_to({"type": "sync", "after": 0})
    await say(conversation.pk, "read the session with this push")
    assert "sync-cursor" in await pushed.receive_from()
    await db(client.logout)()

    for tab in (quiet, pushed):
        assert await tab.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


# Rendered on the test's thread: the test rolls back.
@pytest.mark.django_db
def test_a_push_reads_the_conversation_and_what_changed_in_two_queries(
    user, conversation, django_assert_num_queries
):
    """The push for one change: no second read of the conversation when nothing is newer
    than the first, and no sub-agent query for a conversation without any (a session read
    within the last AUTH_RECHECK_SECONDS is not read again)."""
    set_state(conversation.pk, AgentState.LLM_REQUESTING)  # a turn runs, as while it streams
    before = conversation.seq + 1
    add_message(conversation.pk, "Hello there")
    tab = tab_on(user, conversation.pk)
    with django_assert_num_queries(2):
        html, cursor, running = tab.render_changes(before)
    assert "Hello there" in html
    assert cursor == before + 1
    assert running


@pytest.mark.django_db
def test_tabs_in_the_same_state_share_one_render_of_a_change(
    user, other_user, conversation, django_assert_num_queries
):
    """Two tabs of one person at the same cursor get the push rendered for the first: the
    second reads nothing. A tab in another language, or another person's, renders its own."""
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    before = conversation.seq + 1
    add_message(conversation.pk, "Hello there")
    first, second, third = (tab_on(user, conversation.pk) for _ in range(3))
    third.language = "pt-br"
    html, cursor, _ = first.render_changes(before, upto=before + 1)
    with django_assert_num_queries(0):
        assert second.render_changes(before, upto=before + 1) == (html, cursor, True)
    with django_assert_num_queries(2):
        third.render_changes(before, upto=before + 1)
    stranger = tab_on(other_user, conversation.pk)
    with pytest.raises(ConversationNotFound):
        stranger.render_changes(before, upto=before + 1)
    # A change the shared push does not cover is read again.
    add_message(conversation.pk, "And more")
    with django_assert_num_queries(2):
        assert "And more" in second.render_changes(cursor, upto=cursor + 1)[0]


async def test_a_tab_whose_session_ended_is_not_pushed_to_while_another_tab_is(
    user, conversation, monkeypatch, no_auth_events
):
    """Each tab checks its own session: one signed out elsewhere closes, the other, signed in
    with another session, goes on getting each change."""
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 0.5)
    kept, ended = Client(), Client()
    for client in (kept, ended):
        await db(client.force_login)(user)
    tabs = [await signed_in_socket(client, conversation.pk) for client in (kept, ended)]
    await say(conversation.pk, "one")
    for tab in tabs:
        await tab.send_json_to({"type": "sync", "after": 0})
        assert "sync-cursor" in await tab.receive_from()

    await db(ended.logout)()
    assert await tabs[1].receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    await say(conversation.pk, "for the signed-in tab only")
    assert "for the signed-in tab only" in await tabs[0].receive_from()
    await tabs[0].disconnect()


async def test_an_event_of_a_type_it_does_not_know_leaves_the_socket_open(user, conversation):
    """A later release's process may send a kind of event this one has no handler for
    (during a rolling upgrade): the socket ignores it and goes on."""
    from channels.layers import get_channel_layer

    from core.events import EVENTS_LAYER, conversation_group

    communicator, _ = await connect_as(user, conversation.pk)
    await communicator.send_json_to({"type": "sync", "after": 0})
    await get_channel_layer(EVENTS_LAYER).group_send(
        conversation_group(conversation.pk), {"type": "chat.from_a_later_release"}
    )
    await db(fail_turn)(conversation.pk)
    assert ">Retry</button>" in await pushed_until(communicator, ">Retry</button>")
    await communicator.disconnect()


async def test_a_user_holds_at_most_parley_max_sockets_open_and_others_are_unaffected(
    user, other_user, conversation, settings
):
    """Past the limit a socket is accepted and closed at once with 4429, which the page
    explains (tests/browser/test_refusals.py); closing one frees its place."""
    settings.PARLEY_MAX_SOCKETS = 2
    theirs = await db(services.create_conversation)(owner=other_user, title="Theirs")
    held = [(await connect_as(user, conversation.pk))[0] for _ in range(2)]
    refused, connected = await connect_as(user, conversation.pk)
    assert connected  # accepted, so that the page can read why it closed
    assert await refused.receive_output() == {"type": "websocket.close", "code": 4429}
    other, connected = await connect_as(other_user, theirs.pk)
    assert connected and await other.receive_nothing()

    await held[0].disconnect()
    again, connected = await connect_as(user, conversation.pk)
    assert connected and await again.receive_nothing()
    for communicator in (held[1], other, again):
        await communicator.disconnect()
