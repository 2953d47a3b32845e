"""An outside agent's question, in process: asked by the same services as the agent's own,
it is a question like any other (inbox, live count, webhooks, deadline, audit), and its
conversation never runs a model."""

import json

import pytest

from chat import services as chat_services
from chat.errors import NoAgentHere
from chat.models import Agent, AgentState, Message
from core import events
from core.errors import TooManyMessages
from mcp_server import results, services
from mcp_server.services import Client
from mcp_server.streams import RecentEvents, SessionEvents, serving
from questions import resolving as questions
from questions.models import QuestionStatus
from questions.payloads import Answer
from questions.selectors import pending_questions_for_user
from webhooks.models import Delivery
from webhooks.services import create_webhook

# Also run on PostgreSQL (make test): what it refuses to store (NUL) must never reach it.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

AGENT = Client(name="Claude Code", version="2.1", session_id="s1")
PIZZA_OPTIONS = [{"label": "Funghi"}, {"label": "Pepperoni"}]
PIZZA = {"questions": [{"question": "Which pizza?", "options": PIZZA_OPTIONS}]}


def ask(user, client=AGENT, arguments=PIZZA, tool="ask_user_question"):
    return services.ask(user=user, client=client, tool=tool, arguments=arguments)


def test_a_call_asks_in_a_conversation_named_after_the_client(user, dispatched):
    call = ask(user)
    question = call.question
    conversation = question.conversation
    assert (conversation.title, conversation.agent) == ("Claude Code", Agent.EXTERNAL)
    assert conversation.agent_state == AgentState.AWAITING_USER
    assert question.status == QuestionStatus.PENDING
    assert [q.pk for q in pending_questions_for_user(user=user)] == [question.pk]
    assert (call.client_name, call.client_version, call.session_id) == ("Claude Code", "2.1", "s1")
    assert dispatched == []  # nothing to run: no model here


def test_an_answer_ends_the_turn_without_asking_a_model(user, dispatched, committed):
    call = ask(user)
    question = call.question
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=question.conversation_id,
            tool_call_id=question.tool_call_id,
            answers=[Answer(labels=["Pepperoni"])],
        )
    question.refresh_from_db()
    assert question.conversation.agent_state == AgentState.IDLE
    assert dispatched == []
    result = results.outcome(question, "u")
    assert result.structured_content == {"answers": {"Which pizza?": "Pepperoni"}}
    assert json.loads(result.content[0].text) == result.structured_content
    assert result.meta["parley/question"]["answeredVia"] == "browser"


def test_an_ordinary_message_answers_it_as_typed_text(user, dispatched):
    question = ask(user).question
    chat_services.post_user_message(
        user=user, conversation_id=question.conversation_id, text="Anything vegetarian"
    )
    question.refresh_from_db()
    assert question.status == QuestionStatus.AUTO_RESOLVED
    result = results.outcome(question)
    assert result.structured_content == {"answers": {"Which pizza?": "Anything vegetarian"}}
    # With nothing pending, a message has nobody to read it: refused, and nothing runs.
    with pytest.raises(NoAgentHere):
        chat_services.post_user_message(
            user=user, conversation_id=question.conversation_id, text="Hello?"
        )
    assert dispatched == []


def test_rejecting_is_an_error_result_and_tells_the_user_the_agent_was_told(user):
    question = ask(user, arguments={"action": "Drop the table"}, tool="confirm_action").question
    questions.reject_question(
        user=user, conversation_id=question.conversation_id, tool_call_id=question.tool_call_id
    )
    question.refresh_from_db()
    result = results.outcome(question)
    assert result.is_error and "rejected" in result.content[0].text
    notice = Message.objects.filter(conversation=question.conversation, role="system").get()
    assert notice.blocks[0]["message"] == questions.REJECTED_EXTERNAL


def test_expired_and_deleted_are_error_results(user, clock, settings):
    settings.QUESTION_EXPIRE_AFTER = 60
    question = ask(user).question
    clock.advance(61)
    assert questions.expire_question(question_id=question.pk)
    question.refresh_from_db()
    expired = results.outcome(question)
    assert expired.is_error and "expired" in expired.content[0].text
    assert results.outcome(None).is_error


def test_the_same_call_again_returns_the_undelivered_call(user):
    first = ask(user)
    assert ask(user, client=Client(name="Claude Code", session_id="s2")).pk == first.pk
    services.mark_delivered(call_id=first.pk)
    again = ask(user)
    assert again.pk != first.pk
    # The first question still waits, so the new one gets a conversation of its own.
    assert again.question.conversation_id != first.question.conversation_id


def test_a_session_asks_in_its_conversation_once_the_last_question_is_resolved(user):
    first = ask(user).question
    questions.cancel(user=user, conversation_id=first.conversation_id)
    second = ask(user, arguments={"action": "Go on?"}, tool="confirm_action").question
    assert second.conversation_id == first.conversation_id
    other_session = ask(
        user,
        client=Client(name="Claude Code", session_id="s9"),
        tool="confirm_action",
        arguments={"action": "Other?"},
    )
    assert other_session.question.conversation_id != first.conversation_id


def test_bad_arguments_ask_nothing(user):
    with pytest.raises(ValueError, match="questions"):
        ask(user, arguments={"questions": []})
    with pytest.raises(ValueError):
        ask(user, arguments="not an object")
    assert pending_questions_for_user(user=user) == []


def test_questions_count_as_messages_sent(user, settings, one_minute):
    settings.PARLEY_MESSAGES_PER_MINUTE = 1
    ask(user)
    with pytest.raises(TooManyMessages):
        ask(user, arguments={"action": "Again?"}, tool="confirm_action")


def test_asking_tells_the_live_count_and_the_webhooks(user, settings, committed, monkeypatch):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    create_webhook(user=user, url="http://127.0.0.1:9/hook")
    sent = []
    monkeypatch.setattr(events, "send", lambda group, event: sent.append((group, event)))
    with committed():
        question = ask(user).question
    assert (
        f"attention.{user.pk}",
        events.attention_changed(user.pk, question.conversation_id, waiting=True),
    ) in sent
    assert [json.loads(d.body)["type"] for d in Delivery.objects.all()] == ["question.asked"]


async def test_recent_events_replay_a_streams_events_after_the_last_one_seen():
    store = RecentEvents(max_events=4)
    session = SessionEvents("parley-user-1")
    with serving(session):
        first = await store.store_event("7", None)
        mine = [await store.store_event("7", {"n": n}) for n in range(2)]
        await store.store_event("8", {"n": "other"})
    replayed = []

    async def send(event):
        replayed.append((event.event_id, event.message))

    with serving(session):
        assert await store.replay_events_after(first, send) == "7"
    assert replayed == [(mine[0], {"n": 0}), (mine[1], {"n": 1})]
    with serving(session):
        await store.store_event("8", {"n": "more"})  # the oldest (the priming event) is dropped
        assert await store.replay_events_after(first, send) is None


async def test_recent_events_are_replayed_only_to_the_session_that_stored_them():
    """Two sessions, the same stream id (each client's first call is request 2)."""
    store = RecentEvents()
    alice, bob = SessionEvents("parley-user-1"), SessionEvents("parley-user-2")
    with serving(bob):
        bobs = await store.store_event("2", None)
    with serving(alice):
        alices = await store.store_event("2", None)
        await store.store_event("2", {"answer": "Alice's"})
    with serving(bob):
        await store.store_event("2", {"answer": "Bob's"})
    replayed = []

    async def send(event):
        replayed.append(event.message)

    with serving(bob):
        assert await store.replay_events_after(bobs, send) == "2"
        assert await store.replay_events_after(alices, send) is None
    assert await store.replay_events_after(bobs, send) is None  # a request of no session
    with serving(SessionEvents("parley-user-2")):  # Bob, but another session of his
        assert await store.replay_events_after(bobs, send) is None
    assert replayed == [{"answer": "Bob's"}]
    with serving(SessionEvents("")):
        await store.store_event("2", {"answer": "nobody's"})
    store.forget(bob)
    with serving(bob):
        assert await store.replay_events_after(bobs, send) is None


def event(size: int) -> dict:
    """A message whose JSON is `size` bytes."""
    return {"t": "x" * (size - len('{"t":""}'))}


async def test_recent_events_are_bounded_in_bytes_per_session_per_user_and_in_all():
    store = RecentEvents(max_session_bytes=1000, max_user_bytes=1500, max_bytes=2500)
    mallory, mallorys_other, alice = (
        SessionEvents("parley-user-6"),
        SessionEvents("parley-user-6"),
        SessionEvents("parley-user-1"),
    )
    with serving(alice):
        await store.store_event("2", event(800))
    with serving(mallory):
        for _ in range(10):  # 4,000 bytes into one session: its newest two are kept
            await store.store_event("2", event(400))
    assert (mallory.bytes, len(mallory.events)) == (800, 2)
    with serving(mallorys_other):
        for _ in range(10):  # and into another of hers: her sessions share 1,500
            await store.store_event("2", event(400))
    assert mallory.bytes + mallorys_other.bytes <= 1500
    assert alice.bytes == 800  # untouched by Mallory's
    assert store.bytes == 800 + mallory.bytes + mallorys_other.bytes <= 2500
    with serving(mallorys_other):  # larger than a session may keep: sent, never kept
        huge = await store.store_event("2", event(200_000))
    assert mallorys_other.events[huge][1] is None
    assert store.bytes <= 2500
    store.forget(mallory)
    store.forget(mallorys_other)
    assert store.bytes == 800


def test_a_nul_in_the_client_info_is_cleaned_and_in_the_arguments_refused(user, dispatched):
    """PostgreSQL stores no NUL: the client's name is cleaned, and arguments (kept as they
    were sent) with one are refused with a plain error, never the database's."""
    call = ask(user, client=Client(name="Evil\x00 agent", version="1\x00.0", session_id="s\x00"))
    assert (call.client_name, call.client_version, call.session_id) == ("Evil agent", "1.0", "s")
    assert ask(user, client=Client(name="\x00 ")).client_name == "MCP client"
    with_nul = {"questions": [{"question": "Which\x00 pizza?", "options": PIZZA_OPTIONS}]}
    with pytest.raises(ValueError, match="NUL") as refused:
        ask(user, arguments=with_nul)
    assert "PostgreSQL" not in str(refused.value)
    surrogate = {"questions": [{"question": "Which pizza?\ud800", "options": PIZZA_OPTIONS}]}
    with pytest.raises(ValueError):
        ask(user, arguments=surrogate)
