"""What open pages are told about a transaction's writes (chat.transcript.Transcript): one
`chat.changed` event per edit, with the newest change, once the edit is committed; every
message the edit changed at a cursor of its own, so a page that asks for what changed after
its cursor gets each of them (and a tool's card again once its result is in)."""

import asyncio
import logging

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from chat import services
from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.engine import dispatch, turns
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import NEWEST_FIRST_BATCH, messages_changed_since
from chat.transcript import Transcript, lock
from core import events
from questions import resolving as questions
from questions.payloads import Answer
from tests.factories import add_message, claim, count_loaded_messages, set_state, started_step

# Also run on PostgreSQL (make test): events leave after a real transaction's commit.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def seq_of(conversation) -> int:
    return Conversation.objects.get(pk=conversation.pk).seq


def changes(sent: list, conversation) -> list[dict]:
    """The chat.changed events sent for `conversation`."""
    group = events.conversation_group(conversation.pk)
    return [event for to, event in sent if to == group and event["type"] == "chat.changed"]


def test_one_edit_is_one_event_with_its_newest_change_after_commit(
    user, conversation, sent, django_capture_on_commit_callbacks
):
    """However many changes an edit makes (a message, another, the conversation itself), open
    pages get one event, for the newest, and only once it is committed."""
    before = seq_of(conversation)
    with django_capture_on_commit_callbacks() as callbacks:
        with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
            transcript.append(role=Role.USER, blocks=[TextBlock(text="one")])
            transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text="two")])
            transcript.conversation.title = "Renamed"
            transcript.touch()
        assert sent == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert seq_of(conversation) == before + 3
    assert sent == [
        (
            events.conversation_group(conversation.pk),
            events.conversation_changed(conversation.pk, before + 3),
        )
    ]


def test_a_message_and_the_turn_it_starts_are_one_event(
    user, conversation, sent, committed, dispatched
):
    Conversation.objects.filter(pk=conversation.pk).update(title="")
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="hello")
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.title, stored.agent_state) == ("hello", AgentState.LLM_REQUESTING)
    assert changes(sent, conversation) == [events.conversation_changed(conversation.pk, stored.seq)]
    [message] = Message.objects.filter(conversation=conversation, role=Role.USER)
    assert message.seq <= stored.seq


def test_an_edit_that_fails_or_is_rolled_back_sends_nothing_and_leaves_no_trace(
    conversation, sent, committed
):
    before = seq_of(conversation)
    with committed():
        with (
            pytest.raises(ValueError),
            transaction.atomic(),
            Transcript(lock(conversation.pk)) as transcript,
        ):
            transcript.append(role=Role.USER, blocks=[TextBlock(text="one")])
            raise ValueError
        with pytest.raises(ValueError), transaction.atomic():
            with Transcript(lock(conversation.pk)) as transcript:
                transcript.append(role=Role.USER, blocks=[TextBlock(text="two")])
            raise ValueError  # after the edit ended: its transaction is rolled back
    assert sent == []
    assert seq_of(conversation) == before and not Message.objects.exists()
    add_message(conversation.pk, "three")  # the conversation is written at once again
    assert seq_of(conversation) == before + 1


def test_an_edit_that_changes_nothing_sends_nothing(conversation, sent, committed):
    with committed(), transaction.atomic(), Transcript(lock(conversation.pk)):
        pass
    assert sent == []


def test_a_subagents_changes_are_announced_on_its_parents_page_too(
    user, conversation, sent, committed
):
    child = Conversation.objects.create(owner=user, parent=conversation, title="child")
    with committed():
        add_message(child.pk, "Half way there")
    child.refresh_from_db()
    parent_group = events.conversation_group(conversation.pk)
    assert (parent_group, events.subagent_changed(conversation.pk, child.pk, child.seq)) in sent
    assert changes(sent, conversation) == []  # the parent itself did not change


def test_streamed_text_is_announced_with_what_it_appends(conversation, sent, committed):
    lease = started_step(conversation.pk)
    draft = Message.objects.get(is_draft=True)
    with committed():
        turns.stream_text(lease, "Hello")
    with committed():
        turns.stream_text(lease, "Hello, world")
    with committed():
        turns.stream_text(lease, "Start over")  # a retried request: not an append
    with committed():
        turns.complete_step(lease, text="Start over.", tool_calls=[])

    *_, first, second, restart, done = changes(sent, conversation)
    assert first["appended"] == {"message": draft.pk, "at": 0, "text": "Hello"}
    assert second["appended"] == {"message": draft.pk, "at": 5, "text": ", world"}
    assert second["seq"] == first["seq"] + 1
    assert "appended" not in restart
    assert "appended" not in done  # the whole message, and the turn's end
    assert done["seq"] == seq_of(conversation)


def test_a_send_that_fails_is_logged_and_the_next_changes_still_leave(
    user, conversation, committed, monkeypatch, caplog
):
    """A channel layer that fails (a Redis blip) never turns a committed change into an error:
    the next change's event catches the pages up."""
    delivered = []

    class Layer:
        failures = 1

        async def group_send(self, group, event):
            if self.failures:
                self.failures -= 1
                raise ConnectionError("the channel layer is away")
            delivered.append((group, event))

    layer = Layer()
    monkeypatch.setattr(events, "get_channel_layer", lambda alias: layer)
    with caplog.at_level(logging.ERROR), committed():
        services.rename_conversation(user=user, conversation_id=conversation.pk, title="One")
    assert "the channel layer is away" in caplog.text
    with committed():
        services.rename_conversation(user=user, conversation_id=conversation.pk, title="Two")
    assert seq_of(conversation) == 2  # both committed
    assert delivered == [
        (
            events.conversation_group(conversation.pk),
            events.conversation_changed(conversation.pk, 2),
        )
    ]


def test_appends_in_one_transaction_take_consecutive_places(conversation):
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        for text in ("one", "two", "three"):
            transcript.append(role=Role.USER, blocks=[TextBlock(text=text)])
    add_message(conversation.pk, "four", role=Role.USER)
    rows = Message.objects.filter(conversation=conversation).order_by("order")
    assert [(m.order, m.blocks[0]["text"]) for m in rows] == [
        (0, "one"),
        (1, "two"),
        (2, "three"),
        (3, "four"),
    ]
    assert [m.seq for m in rows] == [1, 2, 3, 4]  # each at its own cursor


def test_a_tool_result_renders_its_calls_card_again(conversation):
    """A tool's result is shown on its call's card: a page that already has the call's
    message gets it again, now with the result."""
    lease = started_step(conversation.pk)
    turns.complete_step(
        lease, text="", tool_calls=[ToolCallBlock(id="c0", name="calculate", arguments={})]
    )
    card = Message.objects.get(role=Role.ASSISTANT)
    cursor = seq_of(conversation)  # the page has the call's card

    turns.record_tool_result(lease, ToolResultBlock(tool_call_id="c0", content="42"))

    changed = messages_changed_since(conversation_id=conversation.pk, after=cursor)
    again = Message.objects.get(pk=card.pk)
    assert card.pk in [m.pk for m in changed]
    assert again.version == card.version + 1 and again.seq > cursor


@pytest.mark.parametrize("calls", [False, True])
def test_a_steps_end_is_one_change(conversation, sent, committed, calls):
    """The model's whole answer and the state it leaves the turn in (its tools to run, or
    the turn ended with the lease given back) are one edit: one event for the open pages."""
    lease = started_step(conversation.pk)
    turns.stream_text(lease, "Let me")
    before = seq_of(conversation)
    tool_calls = [ToolCallBlock(id="c1", name="calculate", arguments={"expression": "1"})]
    with committed():
        state = turns.complete_step(lease, text="Let me see.", tool_calls=tool_calls * calls)
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.seq > before
    assert changes(sent, conversation) == [events.conversation_changed(conversation.pk, stored.seq)]
    if calls:
        assert state.state == stored.agent_state == AgentState.TOOL_EXECUTING
        assert state.tool_calls == tuple(tool_calls) and stored.lease_owner == turns.RUNNER_ID
    else:
        assert state.state == stored.agent_state == AgentState.IDLE
        assert (stored.lease_owner, stored.lease_expires_at) == ("", None)
    [reply] = Message.objects.filter(conversation=conversation, role=Role.ASSISTANT)
    assert (reply.blocks[0], reply.is_draft) == ({"type": "text", "text": "Let me see."}, False)


def test_a_claim_that_opens_its_steps_draft_is_one_change(conversation, sent, committed):
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    before = seq_of(conversation)
    with committed(), transaction.atomic():
        taken = turns.claim(conversation.pk, step_limit=5)
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.lease_owner, stored.lease_token, stored.turn_steps) == (
        turns.RUNNER_ID,
        taken.lease.token,
        1,
    )
    assert Message.objects.get(pk=taken.draft.message_id).is_draft
    assert changes(sent, conversation) == [events.conversation_changed(conversation.pk, before + 1)]


def test_answering_a_question_renders_its_card_again_once_with_the_answer(
    user, conversation, ask, committed, sent, monkeypatch
):
    """The answer is written into the question's own message, which open pages then render
    with the result: the result does not change it a second time. The reply, the answered
    card, the result and the resumed turn: each at its own cursor, one event."""
    ask(user, conversation)
    card = Message.objects.filter(role=Role.ASSISTANT).order_by("order").last()
    cursor = seq_of(conversation)
    dispatched = []
    monkeypatch.setattr(dispatch, "start", dispatched.append)  # the resumed turn is not run
    sent.clear()

    with committed():
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Margherita"])],
        )

    answered = Message.objects.get(pk=card.pk)
    assert answered.version == card.version + 1
    assert answered.blocks[-1]["extra"]["answers"][0]["labels"] == ["Margherita"]
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.agent_state == AgentState.LLM_REQUESTING  # resumed (not run: dispatched)
    assert dispatched == [conversation.pk]
    changed = messages_changed_since(conversation_id=conversation.pk, after=cursor)
    assert [m.role for m in changed] == [Role.ASSISTANT, Role.USER, Role.TOOL]
    assert len({m.seq for m in changed}) == 3 and max(m.seq for m in changed) < stored.seq
    assert changes(sent, conversation) == [events.conversation_changed(conversation.pk, stored.seq)]


def test_a_tool_result_in_a_long_transcript_finds_its_call_reading_from_the_end(
    conversation, monkeypatch
):
    """What a tool result reads to find its call's card does not grow with the transcript."""
    for number in range(200):
        add_message(conversation.pk, f"m{number}", role=(Role.USER, Role.ASSISTANT)[number % 2])
    call = ToolCallBlock(id="c1", name="calculate", arguments={"expression": "1"})
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        asked = transcript.append(role=Role.ASSISTANT, blocks=[call])
    loaded = count_loaded_messages(monkeypatch)
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        transcript.append(role=Role.TOOL, blocks=[ToolResultBlock(tool_call_id="c1", content="1")])
    assert len(loaded) <= NEWEST_FIRST_BATCH + 1  # a page, and the newest message's place
    card = Message.objects.get(pk=asked.pk)
    assert (card.version, card.seq) == (2, seq_of(conversation))  # its card shows the result


def earlier_turns(conversation_id: int, count: int) -> None:
    """`count` finished turns, each a prompt, a call with its result, and a reply; every call
    id `c<n>`."""
    with transaction.atomic(), Transcript(lock(conversation_id)) as transcript:
        for n in range(count):
            for role, blocks in (
                (Role.USER, [TextBlock(text=f"prompt {n}")]),
                (Role.ASSISTANT, [ToolCallBlock(id=f"c{n}", name="calculate", arguments={})]),
                (Role.TOOL, [ToolResultBlock(tool_call_id=f"c{n}", content="2")]),
                (Role.ASSISTANT, [TextBlock(text=f"reply {n}")]),
            ):
                transcript.append(role=role, blocks=blocks)


def test_a_tool_step_in_a_long_transcript_reads_its_turn_not_the_transcript(
    user, conversation, monkeypatch, dispatched
):
    """The open calls are found reading back to the turn's prompt (an answer to a question
    in between is part of the turn); the ids still unique across the whole transcript."""
    earlier_turns(conversation.pk, 100)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="and now?")
    lease = claim(conversation.pk).lease
    calls = [
        ToolCallBlock(id="c7", name="calculate", arguments={"expression": "1"}),  # reused
        ToolCallBlock(id="fresh", name="calculate", arguments={"expression": "2"}),
    ]
    loaded = count_loaded_messages(monkeypatch)
    state = turns.complete_step(lease, text="", tool_calls=calls)
    assert len(loaded) <= 2  # its draft, at most; the ids are read as JSON alone
    first, second = state.tool_calls
    assert first.id != "c7" and second.id == "fresh"  # c7 was taken 100 turns ago

    loaded.clear()
    assert turns.pending_tool_calls(lease) == [first, second]
    turns.record_tool_result(lease, ToolResultBlock(tool_call_id=first.id, content="1"))
    assert turns.pending_tool_calls(lease) == [second]
    # A page from the end each time (its turn, and its call's card), not all 400 messages.
    assert len(loaded) <= 4 * NEWEST_FIRST_BATCH + 1
    turns.tools_done(lease)
    stored = Message.objects.filter(conversation=conversation, role=Role.TOOL)
    results = [b.tool_call_id for m in stored for b in m.parsed_blocks]
    assert results[-2:] == [first.id, second.id]  # the second closed by tools_done


def test_calls_left_after_a_question_are_found_past_the_answer(
    user, conversation, ask, committed, monkeypatch
):
    """A question answered mid-turn: the user's reply is part of the turn, so a call made in
    the same step after the question is still found open behind it."""
    earlier_turns(conversation.pk, 60)
    ask(user, conversation)
    assert [c.id for c in turns.open_tool_calls(Conversation.objects.get(pk=conversation.pk))] == [
        "q1"
    ]
    monkeypatch.setattr(dispatch, "start", lambda conversation_id: None)  # not resumed
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Margherita"])],
        )
    assert turns.open_tool_calls(Conversation.objects.get(pk=conversation.pk)) == []


async def test_waits_on_changes_skip_text_streamed_ahead_of_its_change():
    """The API's waits and event streams read changes: text sent ahead is not one."""
    group = events.conversation_group(7)
    async with events.subscribe(group) as subscription:
        await events.publish(group, events.draft_streamed(7, 1, at=0, text="Hi"))
        await events.publish(group, events.conversation_changed(7, 99))
        # The wait ends on the change: the text sent ahead of it, which came first, was skipped.
        assert await asyncio.wait_for(subscription.wait(5), 5)
        assert subscription.last_event == events.conversation_changed(7, 99)


def test_an_edit_writes_only_the_columns_it_changed(conversation):
    """A transcript edit saves the conversation's row with the fields it set, not every
    column: a long summary is not sent again, and a field another writer set (a pin) is not
    put back."""
    conversation.context_summary = "x" * 10_000
    conversation.save()
    read = Conversation.objects.get(pk=conversation.pk)
    Conversation.objects.filter(pk=conversation.pk).update(pinned=True)  # another request

    with CaptureQueriesContext(connection) as captured, Transcript(read) as transcript:
        transcript.touch()

    (update,) = [q["sql"] for q in captured if q["sql"].startswith("UPDATE")]
    assert '"seq"' in update and '"updated_at"' in update
    assert "context_summary" not in update and '"pinned"' not in update
    read.refresh_from_db()
    assert read.pinned and read.seq == conversation.seq + 1
