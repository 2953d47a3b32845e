"""Streaming in linear bytes: while a reply streams, open tabs get only its new text; the
finished message is rendered once. Each test applies what a tab receives the way htmx does
(out-of-band swaps by id) and checks what a person would read there.

Committed for real: the socket's consumer reads the database on a thread of its own (Channels'
database_sync_to_async), which a test that rolls back would not show its data."""

import html as htmllib
import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import transaction

from chat import services
from chat.engine import runtime, turns
from chat.live import sessions
from chat.models import AgentState, Conversation, Message
from chat.routing import websocket_urlpatterns
from chat.transcript import draft_text
from config.asgi import application
from core import events
from tests.factories import claim, set_state

pytestmark = pytest.mark.django_db(transaction=True)

db = database_sync_to_async

# The out-of-band fragments a push is made of, in document order (test texts contain no lists,
# so a message's </li> is its own).
FRAGMENT = re.compile(
    r'<div hx-swap-oob="beforeend:#transcript">\s*'
    r'<li id="message-(?P<new>\d+)"(?P<new_body>.*?)</li>\s*</div>'
    r'|<li id="message-(?P<replaced>\d+)"(?P<replaced_body>[^>]*hx-swap-oob="true".*?)</li>'
    r'|<div hx-swap-oob="beforeend:#draft-(?P<draft>\d+)">(?P<text>[^<]*)</div>'
    r'|<input type="hidden" id="sync-cursor" value="(?P<cursor>\d+)"',
    re.DOTALL,
)


class Tab:
    """A conversation page as htmx leaves it after each push: its messages by id, and the
    cursor it would sync from after a reconnect."""

    def __init__(self, cursor: int = 0) -> None:
        self.messages: dict[str, str] = {}
        self.cursor = cursor
        self.bytes = 0

    def apply(self, html: str) -> None:
        self.bytes += len(html.encode())
        for fragment in FRAGMENT.finditer(html):
            if fragment["new"]:
                assert fragment["new"] not in self.messages, "a message was added twice"
                self.messages[fragment["new"]] = fragment["new_body"]
            elif fragment["replaced"]:
                self.messages[fragment["replaced"]] = fragment["replaced_body"]
            elif fragment["draft"]:
                body = self.messages[fragment["draft"]]  # an append needs its draft there
                opening = f'id="draft-{fragment["draft"]}">'
                assert opening in body, "text appended to a message that is not a draft"
                start = body.index(opening) + len(opening)
                end = body.index("</div>", start)
                self.messages[fragment["draft"]] = body[:end] + fragment["text"] + body[end:]
            else:
                self.cursor = int(fragment["cursor"])

    def draft(self, message_id: int) -> str:
        """The text shown in a streaming draft, as a person reads it."""
        body = self.messages[str(message_id)]
        found = re.search(rf'id="draft-{message_id}">([^<]*)</div>', body)
        assert found, "the message is not shown as a draft"
        return htmllib.unescape(found[1])

    def text(self, message_id: int) -> str:
        return htmllib.unescape(re.sub(r"<[^>]+>", "", self.messages[str(message_id)]))


async def open_tab(user, conversation_id: int, tab: Tab) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation_id}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"type": "sync", "after": tab.cursor})
    return communicator


async def receive(communicator: WebsocketCommunicator, tab: Tab) -> None:
    tab.apply(await communicator.receive_from(timeout=5))


async def start_turn(conversation) -> turns.Lease:
    await db(set_state)(conversation.pk, AgentState.LLM_REQUESTING)
    return (await db(claim)(conversation.pk)).lease


def claim_step(conversation_id: int) -> turns.Claim:
    """A runner claims the turn and starts its model request (the draft opens)."""
    with transaction.atomic():
        return turns.claim(conversation_id, step_limit=5)


async def current_seq(conversation) -> int:
    return (await db(Conversation.objects.get)(pk=conversation.pk)).seq


async def draft_id(conversation) -> int:
    return (await db(conversation.messages.get)(is_draft=True)).pk


# Text that must arrive exactly as written: markup, entities, quotes, newlines, markdown.
CHUNKS = ["Hello ", "<b>not bold</b> ", "& 'quotes' \"too\"\n", "**star** ", "the end."]


async def test_a_streamed_reply_arrives_whole_and_once_in_an_open_tab(user, conversation):
    lease = await start_turn(conversation)
    tab = Tab(cursor=await current_seq(conversation))
    communicator = await open_tab(user, conversation.pk, tab)
    text = ""
    for chunk in CHUNKS * 4:
        text += chunk
        await db(turns.stream_text)(lease, text)
        await receive(communicator, tab)
        assert tab.draft(await draft_id(conversation)) == text

    message = await draft_id(conversation)
    await db(turns.complete_step)(lease, text=text, tool_calls=[])
    await receive(communicator, tab)
    shown = tab.text(message)
    assert shown.count("the end.") == 4  # once per repetition: nothing doubled
    assert "<strong>star</strong>" in tab.messages[str(message)]  # markdown, once complete
    assert f'id="draft-{message}"' not in tab.messages[str(message)]
    assert list(tab.messages) == [str(message)]
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_a_tab_that_connects_or_reconnects_mid_stream_catches_up_without_gaps_or_duplicates(
    user, conversation
):
    lease = await start_turn(conversation)
    early = Tab(cursor=await current_seq(conversation))
    first = await open_tab(user, conversation.pk, early)
    text = ""
    for chunk in CHUNKS:
        text += chunk
        await db(turns.stream_text)(lease, text)
        await receive(first, early)
    message = await draft_id(conversation)

    # A second tab opens mid-stream (from the page's cursor before the draft), and the first
    # drops out and reconnects from the cursor its page has.
    late = Tab(cursor=early.cursor - 1)
    second = await open_tab(user, conversation.pk, late)
    await receive(second, late)
    assert late.draft(message) == text
    await first.disconnect()
    text += "while one tab was away. "
    await db(turns.stream_text)(lease, text)
    await receive(second, late)
    first = await open_tab(user, conversation.pk, early)
    await receive(first, early)
    assert early.draft(message) == text

    for chunk in CHUNKS:
        text += chunk
        await db(turns.stream_text)(lease, text)
        for communicator, tab in ((first, early), (second, late)):
            await receive(communicator, tab)
            assert tab.draft(message) == text

    await db(turns.complete_step)(lease, text=text, tool_calls=[])
    for communicator, tab in ((first, early), (second, late)):
        await receive(communicator, tab)
        assert tab.text(message).count("while one tab was away.") == 1
        assert tab.text(message).count("the end.") == 2
        assert list(tab.messages) == [str(message)]
        assert await communicator.receive_nothing()
        await communicator.disconnect()


async def test_a_stream_that_starts_over_replaces_the_draft(user, conversation):
    """A retried model request streams from the start again, over the same draft."""
    lease = await start_turn(conversation)
    tab = Tab(cursor=await current_seq(conversation))
    communicator = await open_tab(user, conversation.pk, tab)
    await db(turns.stream_text)(lease, "A first attempt that fai")
    await receive(communicator, tab)
    await db(turns.stream_text)(lease, "Second")
    await receive(communicator, tab)
    assert tab.draft(await draft_id(conversation)) == "Second"
    await communicator.disconnect()


async def test_the_bytes_a_tab_receives_grow_linearly_with_a_long_reply(user, conversation):
    lease = await start_turn(conversation)
    tab = Tab(cursor=await current_seq(conversation))
    communicator = await open_tab(user, conversation.pk, tab)
    text = ""
    # 100 characters a write: what a fast model streams in one flush interval (50 ms).
    words = "a reply that a fast model streams, a hundred characters in each write to the draft "
    for index in range(200):
        text += f"{index:03d} {words}{words}"[:100]
        await db(turns.stream_text)(lease, text)
        await receive(communicator, tab)
    await db(turns.complete_step)(lease, text=text, tool_calls=[])
    await receive(communicator, tab)
    assert len(text) == 20_000
    # Re-sending the whole draft on every push, as before, came to about 200 times the text.
    assert tab.bytes <= 3 * len(text), f"{tab.bytes / len(text):.1f} x the reply's length"
    await communicator.disconnect()


async def test_a_tab_that_missed_a_change_reads_it_instead_of_appending_past_it(
    user, conversation, monkeypatch
):
    """The event of each streamed write carries its new text, and a tab that has every change
    before it appends that text as it comes. A channel layer may drop an event: a tab that
    missed one (here a rename during the stream) reads what it lacks instead."""
    lease = await start_turn(conversation)
    tab = Tab(cursor=await current_seq(conversation))
    communicator = await open_tab(user, conversation.pk, tab)
    text = "The first part. "
    await db(turns.stream_text)(lease, text)
    await receive(communicator, tab)

    send_on_commit = events.send_on_commit
    monkeypatch.setattr(events, "send_on_commit", lambda group, event: None)  # lost
    await db(services.rename_conversation)(
        user=user, conversation_id=conversation.pk, title="Renamed while streaming"
    )
    monkeypatch.setattr(events, "send_on_commit", send_on_commit)
    text += "And the part after it."
    await db(turns.stream_text)(lease, text)
    pushed = await communicator.receive_from(timeout=5)
    tab.apply(pushed)
    assert tab.draft(await draft_id(conversation)) == text
    assert "Renamed while streaming" in pushed
    await communicator.disconnect()


async def test_streamed_text_stops_at_a_session_that_ended_even_if_its_event_was_lost(
    user, conversation, monkeypatch, no_auth_events
):
    """Appends skip the session read only while the last one is fresh: a session that ended
    without its `auth.changed` event (a dropped event) gets no more text once that read is
    AUTH_RECHECK_SECONDS old."""
    from django.test import Client

    # The socket's own re-check is an hour away: only the append can notice the session ended.
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 3600)
    client = Client()
    await db(client.force_login)(user)
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"origin", b"http://127.0.0.1:8000"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    lease = await start_turn(conversation)
    tab = Tab(cursor=await current_seq(conversation))
    communicator = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.pk}/", headers=headers
    )
    assert (await communicator.connect())[0]
    await communicator.send_json_to({"type": "sync", "after": tab.cursor})
    await db(turns.stream_text)(lease, "Shown while signed in. ")
    await receive(communicator, tab)

    await db(client.logout)()  # its auth.changed event is lost
    # The tab's last read is stale now, as AUTH_RECHECK_SECONDS after it (no waiting for it).
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 0)
    await db(turns.stream_text)(lease, "Shown while signed in. Not after signing out.")
    assert await communicator.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": 4401,
    }


async def streaming_in_a_tab(user, conversation, text: str):
    """A running turn whose draft holds `text`, and an open tab that shows it: (the lease,
    the tab, its socket, the draft's id)."""
    lease = await start_turn(conversation)
    tab = Tab(cursor=await current_seq(conversation))
    communicator = await open_tab(user, conversation.pk, tab)
    await db(turns.stream_text)(lease, text)
    await receive(communicator, tab)
    return lease, tab, communicator, await draft_id(conversation)


async def test_text_is_shown_as_the_runner_is_about_to_store_it_and_only_once(user, conversation):
    """The runner sends each batch to the page just before its write (StreamWriter): a tab
    that has the draft shows it at once, then takes the write's change as already shown. A
    tab without the draft ignores it and gets the text from the change."""
    lease, tab, communicator, draft = await streaming_in_a_tab(user, conversation, "Hello ")
    late = Tab(cursor=await current_seq(conversation))  # opened after the draft: lacks it
    late_communicator = await open_tab(user, conversation.pk, late)
    assert await late_communicator.receive_nothing()

    writer = runtime.StreamWriter(lease, turns.Draft(draft, "Hello "))
    writer.text = "Hello <world> & more"
    await writer.show_ahead()
    await receive(communicator, tab)
    assert tab.draft(draft) == "Hello <world> & more"
    stored = await db(Message.objects.get)(pk=draft)
    assert stored.blocks[0]["text"] == "Hello "  # shown before it is stored
    assert await late_communicator.receive_nothing()

    await writer.flush()
    await receive(late_communicator, late)  # the write's change has reached the tabs
    assert late.draft(draft) == "Hello <world> & more"
    assert await communicator.receive_nothing()  # nothing twice
    for each in (communicator, late_communicator):
        await each.disconnect()


async def test_a_steps_first_words_are_shown_at_once_and_stored_with_the_next_batch(
    user, conversation, monkeypatch
):
    """The first words of a step reach an open tab as they arrive, before any write (which
    waits for a thread and a commit); the next batch stores them with the rest, and the tab
    shows each word once."""
    monkeypatch.setattr(runtime, "STREAM_FLUSH_INTERVAL", 3600)  # later batches: when due
    lease, tab, communicator, draft = await streaming_in_a_tab(user, conversation, "")
    writer = runtime.StreamWriter(lease, turns.Draft(draft, ""))
    await writer.add("Onward: ")
    await receive(communicator, tab)
    assert tab.draft(draft) == "Onward: "
    assert draft_text(await db(Message.objects.get)(pk=draft)) == ""  # not stored yet

    await writer.add("Alpha")  # not due: kept
    assert await communicator.receive_nothing()
    await writer.flush()
    await receive(communicator, tab)
    assert tab.draft(draft) == "Onward: Alpha"
    assert draft_text(await db(Message.objects.get)(pk=draft)) == "Onward: Alpha"
    assert await communicator.receive_nothing()  # the write's change: already shown
    await communicator.disconnect()


async def test_a_retried_stream_is_not_shown_ahead_onto_the_failed_attempts_text(
    user, conversation, monkeypatch
):
    # Text is shown and written only when the test makes it due (however slow the machine).
    monkeypatch.setattr(runtime, "STREAM_FLUSH_INTERVAL", 3600)
    failed = "A first attempt that fai"
    lease, tab, communicator, draft = await streaming_in_a_tab(user, conversation, failed)
    writer = runtime.StreamWriter(lease, turns.Draft(draft, failed))
    writer.restart()
    writer.last_write = float("-inf")  # due
    await writer.add("Second")
    await receive(communicator, tab)
    assert tab.draft(draft) == "Second"
    await writer.add(" try")  # not due: kept
    writer.last_write = float("-inf")
    await writer.add(", streamed ahead")
    await receive(communicator, tab)
    assert tab.draft(draft) == "Second try, streamed ahead"
    assert await communicator.receive_nothing()
    await communicator.disconnect()


async def test_text_a_stopped_runner_shows_ahead_does_not_stay_on_the_page(user, conversation):
    """Stop before the model's first words: the empty draft is kept (hidden, no longer a
    draft) as a change the tabs see, so the words the runner sends ahead before its write is
    refused (a worker learns of the stop only then) find no draft to go into."""
    await db(set_state)(conversation.pk, AgentState.LLM_REQUESTING)
    tab = Tab(cursor=await current_seq(conversation))
    claimed = await db(claim_step)(conversation.pk)  # opens the empty draft
    communicator = await open_tab(user, conversation.pk, tab)
    await receive(communicator, tab)
    draft = claimed.draft.message_id
    assert tab.draft(draft) == ""

    await db(services.stop_turn)(user=user, conversation_id=conversation.pk)
    await receive(communicator, tab)
    writer = runtime.StreamWriter(claimed.lease, claimed.draft)
    await writer.add("Words the user never sees")  # first words: shown at once, stored later
    with pytest.raises(turns.LeaseLost):
        await writer.flush()
    assert await communicator.receive_nothing()
    assert "Words" not in tab.messages[str(draft)]
    assert 'id="draft-' not in tab.messages[str(draft)]
    await communicator.disconnect()
