"""A process that runs its own turns (one server, no Redis) claims a turn in the very commit
that starts it (chat.turns._set_running): the message sent, the question answered. The
runner then starts the model request at once, and every guarantee still holds: the lease
fences, a duplicate dispatch runs nothing, a process that dies before its runner starts
leaves a turn the sweep runs once."""

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async as db
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat import runner, runtime, services, turns
from chat.blocks import TextBlock, ToolResultBlock, parse_blocks
from chat.models import AgentState, Conversation, Message, Role
from chat.engine.providers.base import TextDelta
from questions import services as questions
from questions.blocks import Answer
from tests.fakes import FakeProvider

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def claims(monkeypatch) -> list[turns.Claim]:
    """This process runs its turns: the claims its commits hand to its runner loop, in order
    (not run: the test runs them). Nothing is dispatched to be claimed elsewhere."""
    handed: list[turns.Claim] = []

    class Loop:
        def call_soon_threadsafe(self, callback):
            conversation_id, claim = callback.args
            assert claim.lease.conversation_id == conversation_id
            handed.append(claim)

    monkeypatch.setattr(runner, "_loop", Loop())
    monkeypatch.setattr(runner, "dispatch", lambda conversation_id: pytest.fail("dispatched"))
    return handed


def use(monkeypatch, provider):
    monkeypatch.setattr(runtime, "get_provider", lambda: provider)
    return provider


def transcript_of(conversation) -> list[tuple[str, list, bool]]:
    return [
        (m.role, parse_blocks(m.blocks), m.is_draft)
        for m in Message.objects.filter(conversation=conversation).order_by("order")
    ]


def test_a_sent_message_is_claimed_with_its_first_request_counted_in_the_same_commit(
    conversation, user, monkeypatch, claims
):
    model = use(monkeypatch, FakeProvider([TextDelta("Hello there.")]))
    with CaptureQueriesContext(connection) as queries:
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")

    [claim] = claims
    # Two changes, one write of the row (chat.transcript.one_write): the message, then the
    # turn running with its draft open.
    writes = [q for q in queries if q["sql"].startswith('UPDATE "chat_conversation"')]
    assert (len(writes), Conversation.objects.get(pk=conversation.pk).seq) == (1, 2)
    conversation.refresh_from_db()
    # Committed before the runner did anything: the lease is this process's, the request
    # counted, its (empty, hidden) draft there, and its history read.
    assert conversation.agent_state == AgentState.LLM_REQUESTING
    assert (conversation.lease_owner, conversation.lease_token) == (
        turns.RUNNER_ID,
        claim.lease.token,
    )
    assert conversation.lease_expires_at > timezone.now()
    assert (conversation.turn_steps, claim.step_started) == (1, True)
    assert transcript_of(conversation) == [
        (Role.USER, [TextBlock(text="Hi")], False),
        (Role.ASSISTANT, [TextBlock(text="")], True),
    ]
    assert [(m.role, m.blocks) for m in claim.history] == [("user", [TextBlock(text="Hi")])]
    # A dispatch of the same turn from anywhere else (a sweep, a duplicate) finds it held.
    assert turns.claim(conversation.pk) is None
    assert turns.stale_runs() == []

    async_to_sync(runtime.run_turn)(conversation.pk, claim=claim)

    conversation.refresh_from_db()
    assert (conversation.agent_state, conversation.lease_owner) == (AgentState.IDLE, "")
    assert conversation.turn_steps == 1  # the request the claim counted, sent once
    assert model.histories == [claim.history]
    assert transcript_of(conversation) == [
        (Role.USER, [TextBlock(text="Hi")], False),
        (Role.ASSISTANT, [TextBlock(text="Hello there.")], False),
    ]


def test_an_answer_is_claimed_in_its_commit_and_the_model_gets_it_at_once(
    conversation, user, model, claims
):
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    async_to_sync(runtime.run_turn)(conversation.pk, claim=claims.pop())
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.AWAITING_USER

    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
        via="browser",
    )

    [claim] = claims
    conversation.refresh_from_db()
    assert (conversation.lease_owner, conversation.turn_steps) == (turns.RUNNER_ID, 1)
    # The request's history ends with the answer, as the model will get it.
    [result] = claim.history[-1].blocks
    assert isinstance(result, ToolResultBlock) and result.content == "Funghi"

    async_to_sync(runtime.run_turn)(conversation.pk, claim=claim)

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    role, blocks, is_draft = transcript_of(conversation)[-1]
    assert (role, blocks, is_draft) == (Role.ASSISTANT, [TextBlock(text="Thanks: Funghi")], False)


def test_a_turn_claimed_by_a_process_that_died_before_running_it_is_run_once_by_the_sweep(
    conversation, user, monkeypatch, claims
):
    use(monkeypatch, FakeProvider([TextDelta("The reply.")]))
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")
    [lost] = claims  # the process dies here: its runner never starts
    Conversation.objects.filter(pk=conversation.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert turns.stale_runs() == [conversation.pk]

    async_to_sync(runtime.run_turn)(conversation.pk)  # another process's sweep

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert conversation.lease_token > lost.lease.token
    with pytest.raises(turns.LeaseLost):  # the dead process's lease is fenced out
        turns.stream_text(lost.lease, "too late")
    # One reply, in the draft the lost claim opened.
    assert transcript_of(conversation) == [
        (Role.USER, [TextBlock(text="Hi")], False),
        (Role.ASSISTANT, [TextBlock(text="The reply.")], False),
    ]


async def test_a_claim_that_arrives_while_the_turns_last_task_finishes_runs_after_it(
    conversation, user, monkeypatch, claims
):
    use(monkeypatch, FakeProvider([TextDelta("After the pause.")]))
    await db(services.post_user_message)(user=user, conversation_id=conversation.pk, text="Hi")
    [claim] = claims
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(runner, "_loop", loop)
    monkeypatch.setattr(runner, "_tasks", {})
    monkeypatch.setattr(runner, "_again", {})
    finishing = asyncio.Event()
    # The task that ran the turn until its last pause is still releasing its lease.
    last = loop.create_task(finishing.wait())
    runner._tasks[conversation.pk] = last
    last.add_done_callback(lambda _: runner._finished(conversation.pk))

    runner.spawn(conversation.pk, claim)
    assert runner._again == {conversation.pk: claim}  # not run alongside it, not dropped
    finishing.set()
    await last
    await runner.wait_for_turns()

    refreshed = await db(Conversation.objects.get)(pk=conversation.pk)
    assert refreshed.agent_state == AgentState.IDLE
    last_message = await db(lambda: Message.objects.order_by("order").last())()
    assert parse_blocks(last_message.blocks) == [TextBlock(text="After the pause.")]


async def test_a_claim_that_reaches_a_stopping_process_is_given_back_at_once(
    conversation, user, claims, monkeypatch
):
    await db(services.post_user_message)(user=user, conversation_id=conversation.pk, text="Hi")
    [claim] = claims
    monkeypatch.setattr(runner, "_loop", asyncio.get_running_loop())
    monkeypatch.setattr(runner, "_stopping", True)
    monkeypatch.setattr(runner, "_tasks", {})
    assert not runner.runs_turns_here()

    runner.spawn(conversation.pk, claim)

    await runner.wait_for_turns()

    # Free for another process's sweep now, without waiting for the lease to lapse.
    assert await db(turns.stale_runs)() == [conversation.pk]
    refreshed = await db(Conversation.objects.get)(pk=conversation.pk)
    assert (refreshed.lease_owner, refreshed.lease_expires_at) == ("", None)
    assert refreshed.agent_state == AgentState.LLM_REQUESTING  # nothing ran here


def test_a_turn_that_pauses_gives_its_lease_back_in_that_very_change(
    conversation, user, model, monkeypatch, caplog
):
    """No write of the runner's own follows the pause, so an answer given right away does
    not wait behind one (on SQLite, a writer that finds the database locked backs off for
    tens of ms); a turn that ends is released by its runner, and logged as finished."""
    released, release = [], turns.release
    monkeypatch.setattr(turns, "release", released.append)
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    paused = Conversation.objects.get(pk=conversation.pk)
    assert paused.agent_state == AgentState.AWAITING_USER
    assert (paused.lease_owner, paused.lease_expires_at) == ("", None)
    assert released == []

    monkeypatch.setattr(turns, "release", release)
    caplog.set_level("INFO", logger="parley.runtime")
    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Pepperoni"])],
    )
    ended = Conversation.objects.get(pk=conversation.pk)
    assert ended.agent_state == AgentState.IDLE
    assert (ended.lease_owner, ended.lease_expires_at) == ("", None)
    assert [r.event for r in caplog.records if hasattr(r, "event")][-1] == "finished"
