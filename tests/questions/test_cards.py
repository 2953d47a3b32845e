"""Where a waiting question's state lives: the block in the asking message keeps what was asked
(and, once resolved, how); whom it waits for is its row's, and who may answer the
membership's, read whenever its card is rendered. Assigning it, or a change of the
conversation's members, writes no message: it sends `chat.refresh`, and each open page of the
conversation renders the card again."""

import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from chat import services, sharing
from chat.engine.providers.base import ToolCallRequest
from chat.models import Conversation, Message
from chat.routing import websocket_urlpatterns
from core import events
from questions import deadlines, resolving
from questions.models import Question
from questions.payloads import Answer
from tests.factories import tab_on
from tests.fakes import PIZZA

db = database_sync_to_async


def ask(owner, conversation_id: int, model) -> None:
    """The conversation's next turn asks PIZZA as q1 (run after the commit, to its pause)."""
    model.responses.insert(0, [ToolCallRequest("q1", "question", PIZZA)])
    services.post_user_message(user=owner, conversation_id=conversation_id, text="Lunch?")


def share(owner, conversation_id: int, username: str, role="participant") -> None:
    sharing.share_conversation(
        user=owner, conversation_id=conversation_id, username=username, role=role
    )


def assign(by, question, assignee) -> None:
    resolving.assign_question(
        user=by,
        conversation_id=question.conversation_id,
        tool_call_id=question.tool_call_id,
        assignee_id=assignee.pk if assignee else None,
    )


def stored(question) -> tuple:
    """The asking message's row and the conversation's change cursor, as stored now."""
    message = Message.objects.get(pk=question.message_id)
    seq = Conversation.objects.get(pk=question.conversation_id).seq
    return message.blocks, message.version, message.seq, message.updated_at, seq


def selected(html: str) -> str:
    """The name of the option the card's "Assign to" select has selected."""
    select = html[html.index('name="assignee"') : html.index("</select>", html.index("assignee"))]
    return re.search(r"<option value=\"\d*\" selected>([^<]+)</option>", select).group(1)


def options(html: str) -> list[str]:
    select = html[html.index('name="assignee"') : html.index("</select>", html.index("assignee"))]
    return re.findall(r"<option value=\"\d*\"(?: selected)?>([^<]+)</option>", select)


@pytest.fixture
def people(django_user_model):
    """bob and carol, besides ada (`user`), the owner."""
    return [django_user_model.objects.create_user(username=name) for name in ("bob", "carol")]


@pytest.fixture
def refreshes(monkeypatch) -> list[tuple[str, dict]]:
    """The `chat.refresh` events sent (after commit), with their groups."""
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(
        events,
        "send",
        lambda group, event: sent.append((group, event)) if event["type"] == "chat.refresh" else 0,
    )
    return sent


@pytest.fixture
def asked(user, conversation, people, model, committed) -> Question:
    """ada's conversation, shared with bob (participant), waits for the answer to q1."""
    with committed():
        share(user, conversation.pk, "bob")
    with committed():
        ask(user, conversation.pk, model)
    return Question.objects.get(conversation=conversation, tool_call_id="q1")


# --- No message written ---------------------------------------------------------------------


@pytest.mark.django_db
def test_assigning_writes_no_message_and_refreshes_the_open_pages(
    asked, user, people, committed, refreshes
):
    bob, _carol = people
    before = stored(asked)
    with committed():
        assign(user, asked, bob)
    assert stored(asked) == before
    refresh = events.refresh(asked.conversation_id, [asked.message_id])
    assert refreshes == [(events.conversation_group(asked.conversation_id), refresh)]
    # The row says whom it waits for; the block, what was asked.
    asked.refresh_from_db()
    assert asked.assigned_to == bob
    with committed():
        assign(user, asked, bob)  # no change: nothing to refresh
    with committed():
        assign(bob, asked, None)
    assert stored(asked) == before
    assert len(refreshes) == 2


@pytest.mark.django_db
def test_a_change_of_members_writes_no_message_and_refreshes_the_open_pages(
    asked, user, people, committed, refreshes
):
    bob, _carol = people
    with committed():
        assign(user, asked, bob)
    before = stored(asked)
    refreshes.clear()
    with committed():
        share(user, asked.conversation_id, "carol")  # added
    with committed():
        share(user, asked.conversation_id, "carol", role="viewer")  # another role
    with committed():
        sharing.remove_member(user=user, conversation_id=asked.conversation_id, member_id=bob.pk)
    assert stored(asked) == before
    refresh = events.refresh(asked.conversation_id, [asked.message_id])
    assert [event for _group, event in refreshes] == [refresh] * 3
    # The assignee removed, it waits for everyone again: on its row.
    asked.refresh_from_db()
    assert asked.assigned_to is None


@pytest.mark.django_db
def test_an_escalation_writes_no_message_and_refreshes_the_open_pages(
    settings, asked, user, people, committed, clock, refreshes
):
    settings.QUESTION_ESCALATE_AFTER = 60
    bob, _carol = people
    with committed():
        assign(user, asked, bob)
    before = stored(asked)
    refreshes.clear()
    clock.advance(61)
    with committed():
        deadlines.sweep()
    asked.refresh_from_db()
    assert asked.assigned_to == user
    assert stored(asked) == before
    assert [event["messages"] for _group, event in refreshes] == [[asked.message_id]]


@pytest.mark.django_db
def test_a_resolution_still_writes_the_block_the_card_renders(asked, user, committed):
    before = stored(asked)
    with committed():
        resolving.answer_question(
            user=user,
            conversation_id=asked.conversation_id,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    blocks, version, *_ = stored(asked)
    assert version == before[1] + 1
    assert blocks != before[0]


@pytest.mark.django_db
def test_the_page_shows_whom_it_waits_for_from_the_row(asked, user, people, committed):
    bob, _carol = people
    with committed():
        assign(user, asked, bob)
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat:conversation_detail", args=[asked.conversation_id])).text
    assert selected(page) == "bob"
    assert options(page) == ["Everyone who can answer", "ada", "bob"]


@pytest.mark.django_db
def test_rendering_a_card_again_reads_five_queries(
    asked, user, people, committed, django_assert_num_queries
):
    """The conversation with the reader's role; the message; the card's owner, participants,
    and its row with its draft. As much as the push of a rewritten block read, without the
    writes that made it."""
    bob, _carol = people
    with committed():
        assign(user, asked, bob)
    tab = tab_on(user, asked.conversation_id, sent_seq=stored(asked)[-1])
    with django_assert_num_queries(5):
        html = tab.render_refreshed([asked.message_id])
    assert f'<li id="message-{asked.message_id}"' in html
    assert selected(html) == "bob"


# --- Open pages -----------------------------------------------------------------------------

consumer_test = pytest.mark.django_db(transaction=True)


async def synced_page(user, conversation_id, **sync):
    """A conversation socket of `user`'s that has everything up to now."""
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation_id}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    seq = await db(lambda: Conversation.objects.get(pk=conversation_id).seq)()
    await communicator.send_json_to({"type": "sync", "after": seq, **sync})
    return communicator


@pytest.fixture
def shared_and_asked(user, conversation, people, model):
    """As `asked`, committed for real (the consumer reads on a thread of its own)."""

    async def make() -> Question:
        await db(share)(user, conversation.pk, "bob")
        await db(ask)(user, conversation.pk, model)
        return await db(Question.objects.get)(conversation=conversation, tool_call_id="q1")

    return make


def card(html: str, question: Question) -> str:
    """The pushed card: its message, swapped in place, and nothing of the transcript's cursor."""
    assert f'<li id="message-{question.message_id}"' in html
    assert 'hx-swap-oob="true"' in html
    assert "sync-cursor" not in html
    return html


@consumer_test
async def test_an_open_page_gets_the_card_again_when_the_question_is_assigned(
    user, people, shared_and_asked
):
    bob, _carol = people
    question = await shared_and_asked()
    pages = [await synced_page(person, question.conversation_id) for person in (user, bob)]
    assert await pages[0].receive_nothing()

    await db(assign)(user, question, bob)
    for page in pages:
        assert selected(card(await page.receive_from(), question)) == "bob"
    await db(assign)(bob, question, None)
    for page in pages:
        assert selected(card(await page.receive_from(), question)) == "Everyone who can answer"
    for page in pages:
        await page.disconnect()


@consumer_test
async def test_an_open_page_gets_the_new_choice_of_assignees_when_members_change(
    user, people, shared_and_asked
):
    bob, _carol = people
    question = await shared_and_asked()
    await db(assign)(user, question, bob)
    page = await synced_page(user, question.conversation_id)

    await db(share)(user, question.conversation_id, "carol")
    html = card(await page.receive_from(), question)
    assert options(html) == ["Everyone who can answer", "ada", "bob", "carol"]
    assert selected(html) == "bob"

    await db(sharing.remove_member)(
        user=user, conversation_id=question.conversation_id, member_id=bob.pk
    )
    html = card(await page.receive_from(), question)
    assert options(html) == ["Everyone who can answer", "ada", "carol"]
    assert selected(html) == "Everyone who can answer"
    await page.disconnect()


@consumer_test
async def test_a_page_that_reconnects_renders_its_waiting_cards_again(
    user, people, shared_and_asked
):
    """A refresh sent while its socket was down never reached it: the page says it opened
    again, and gets its waiting cards as they are now. A first sync at the latest change gets
    nothing."""
    bob, _carol = people
    question = await shared_and_asked()
    await db(assign)(user, question, bob)  # no page open

    first = await synced_page(user, question.conversation_id)
    assert await first.receive_nothing()
    await first.disconnect()
    again = await synced_page(user, question.conversation_id, again=True)
    assert selected(card(await again.receive_from(), question)) == "bob"
    await again.disconnect()


@consumer_test
async def test_a_refresh_before_the_sync_is_rendered_once_synced(user, people, shared_and_asked):
    bob, _carol = people
    question = await shared_and_asked()
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/conversations/{question.conversation_id}/"
    )
    communicator.scope["user"] = user
    assert (await communicator.connect())[0]
    await db(assign)(user, question, bob)
    assert await communicator.receive_nothing()  # nothing before the page says what it has
    seq = await db(lambda: Conversation.objects.get(pk=question.conversation_id).seq)()
    await communicator.send_json_to({"type": "sync", "after": seq})
    assert selected(card(await communicator.receive_from(), question)) == "bob"
    await communicator.disconnect()
