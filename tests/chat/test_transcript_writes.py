"""What open pages are told about a transaction's writes (chat.transcript): every message it
changed, each once, however many changes it made to it."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from chat import runner, transcript, turns
from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import messages_changed_since
from questions import services as questions
from questions.blocks import Answer
from questions.selectors import pending_question
from tests.factories import set_state
from tests.questions.test_live import ask

pytestmark = pytest.mark.django_db(transaction=True)


def seq_of(conversation) -> int:
    return Conversation.objects.get(pk=conversation.pk).seq


def test_a_tool_result_marks_its_calls_message_changed(conversation):
    """A tool's result is shown on its call's card: a page that already has the call's
    message gets it again, now with the result."""
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    lease = turns.claim(conversation.pk).lease
    turns.complete_step(
        lease, text="", tool_calls=[ToolCallBlock(id="c0", name="calculate", arguments={})]
    )
    call_message = Message.objects.get(role=Role.ASSISTANT)
    cursor = seq_of(conversation)  # the page has the call's card

    turns.record_tool_result(lease, ToolResultBlock(tool_call_id="c0", content="42"))

    changed = messages_changed_since(conversation_id=conversation.pk, after=cursor)
    assert call_message.pk in [m.pk for m in changed]


def test_answering_a_question_changes_its_message_once(user, conversation, model, monkeypatch):
    """The answer is written into the question's own message, which open pages then render
    with the result: the result does not mark it changed a second time."""
    ask(user, conversation, model)
    monkeypatch.setattr(runner, "dispatch", lambda conversation_id: None)  # no resumed turn
    pending = pending_question(Conversation.objects.get(pk=conversation.pk))
    version = pending.message.version
    cursor = seq_of(conversation)

    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id=pending.tool_call_id,
        answers=[Answer(labels=["Margherita"])],
    )

    question = Message.objects.get(pk=pending.message.pk)
    assert question.version == version + 1
    changed = messages_changed_since(conversation_id=conversation.pk, after=cursor)
    assert question.pk in [m.pk for m in changed]
    assert question.blocks[-1]["extra"]["answers"][0]["labels"] == ["Margherita"]


def test_appends_in_one_transaction_take_consecutive_places(conversation):
    """The transaction remembers the place of its last append instead of reading it again."""
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        locked = transcript.lock(conversation.pk)
        for text in ("one", "two", "three"):
            transcript.append_message(locked, role=Role.USER, blocks=[TextBlock(text=text)])
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
    assert sum('FROM "chat_message"' in sql for sql in reads) == 1
    with transaction.atomic():
        locked = transcript.lock(conversation.pk)
        transcript.append_message(locked, role=Role.USER, blocks=[TextBlock(text="four")])
    rows = Message.objects.filter(conversation=conversation).order_by("order")
    assert [(m.order, m.blocks[0]["text"]) for m in rows] == [
        (0, "one"),
        (1, "two"),
        (2, "three"),
        (3, "four"),
    ]


def conversation_writes(queries) -> int:
    return sum(q["sql"].startswith('UPDATE "chat_conversation"') for q in queries)


@pytest.mark.parametrize("calls", [False, True])
def test_a_steps_end_is_one_change_and_one_write_of_the_row(conversation, calls):
    """The model's whole answer and the state it leaves the turn in (its tools to run, or
    the turn ended with the lease given back) are one change: one write of the row, one
    push to the open pages."""
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    lease = turns.claim(conversation.pk).lease
    turns.begin_step(lease)
    turns.stream_text(lease, "Let me")
    before = seq_of(conversation)
    tool_calls = [ToolCallBlock(id="c1", name="calculate", arguments={"expression": "1"})]
    with CaptureQueriesContext(connection) as queries:
        state = turns.complete_step(lease, text="Let me see.", tool_calls=tool_calls * calls)
    assert (conversation_writes(queries), seq_of(conversation)) == (1, before + 1)
    stored = Conversation.objects.get(pk=conversation.pk)
    if calls:
        assert state.state == stored.agent_state == AgentState.TOOL_EXECUTING
        assert state.tool_calls == tuple(tool_calls) and stored.lease_owner == turns.RUNNER_ID
    else:
        assert state.state == stored.agent_state == AgentState.IDLE
        assert (stored.lease_owner, stored.lease_expires_at) == ("", None)
    [reply] = Message.objects.filter(conversation=conversation, role=Role.ASSISTANT)
    assert (reply.blocks[0], reply.is_draft) == ({"type": "text", "text": "Let me see."}, False)


def test_a_claim_that_opens_its_steps_draft_writes_the_row_once(conversation):
    """Taking the lease and opening the step's draft: the draft's change saves the lease."""
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    with CaptureQueriesContext(connection) as queries:
        claim = turns.claim(conversation.pk, step_limit=5)
    assert conversation_writes(queries) == 1
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.lease_owner, stored.lease_token, stored.turn_steps) == (
        turns.RUNNER_ID,
        claim.lease.token,
        1,
    )
    assert Message.objects.get(pk=claim.draft.message_id).is_draft


def test_a_tool_result_in_a_long_transcript_finds_its_call_reading_from_the_end(
    conversation, monkeypatch
):
    """What a tool result reads to find its call's card does not grow with the transcript."""
    from chat.selectors import NEWEST_FIRST_BATCH
    from tests.factories import add_message, count_loaded_messages

    for number in range(200):
        add_message(conversation.pk, f"m{number}", role=(Role.USER, Role.ASSISTANT)[number % 2])
    with transaction.atomic():
        locked = transcript.lock(conversation.pk)
        call = ToolCallBlock(id="c1", name="calculate", arguments={"expression": "1"})
        asked = transcript.append_message(locked, role=Role.ASSISTANT, blocks=[call])
    loaded = count_loaded_messages(monkeypatch)
    with transaction.atomic():
        locked = transcript.lock(conversation.pk)
        transcript.append_message(
            locked, role=Role.TOOL, blocks=[ToolResultBlock(tool_call_id="c1", content="1")]
        )
    assert len(loaded) <= NEWEST_FIRST_BATCH + 1  # a page, and the newest message's place
    card = Message.objects.get(pk=asked.pk)
    assert (card.version, card.seq) == (2, seq_of(conversation))  # its card shows the result


def test_an_answer_writes_the_row_once_and_pages_get_each_of_its_changes(
    user, conversation, model, monkeypatch
):
    """The reply, the answered card, the tool result and the running turn with its draft:
    four changes (each message at its own cursor), one write of the row, one push."""
    ask(user, conversation, model)
    monkeypatch.setattr(runner, "dispatch", lambda conversation_id: None)  # no resumed turn
    pending = pending_question(Conversation.objects.get(pk=conversation.pk))
    cursor = seq_of(conversation)
    with CaptureQueriesContext(connection) as queries:
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id=pending.tool_call_id,
            answers=[Answer(labels=["Margherita"])],
        )
    assert conversation_writes(queries) == 1
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.agent_state == AgentState.LLM_REQUESTING
    changed = messages_changed_since(conversation_id=conversation.pk, after=cursor)
    # The reply, the card, the result, the running state: the messages at their own cursors.
    assert stored.seq == cursor + 4
    assert [m.role for m in changed] == [Role.ASSISTANT, Role.USER, Role.TOOL]
    assert sorted(m.seq for m in changed) == [cursor + 1, cursor + 2, cursor + 3]


def test_a_message_writes_the_row_once(user, conversation, monkeypatch):
    from chat import services

    monkeypatch.setattr(runner, "dispatch", lambda conversation_id: None)
    Conversation.objects.filter(pk=conversation.pk).update(title="")
    with CaptureQueriesContext(connection) as queries:
        services.post_user_message(user=user, conversation_id=conversation.pk, text="hello")
    assert conversation_writes(queries) == 1
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.title, stored.agent_state) == ("hello", AgentState.LLM_REQUESTING)
    [message] = Message.objects.filter(conversation=conversation, role=Role.USER)
    assert message.seq <= stored.seq


def test_a_failure_inside_one_write_leaves_the_row_as_it_was(conversation):
    before = seq_of(conversation)
    with pytest.raises(ValueError), transaction.atomic():
        locked = transcript.lock(conversation.pk)
        with transcript.one_write(locked):
            transcript.append_message(locked, role=Role.USER, blocks=[TextBlock(text="one")])
            raise ValueError
    assert seq_of(conversation) == before and not Message.objects.exists()
    with transaction.atomic():  # the same instance writes at once again afterwards
        locked = transcript.lock(conversation.pk)
        with pytest.raises(ValueError), transcript.one_write(locked):
            raise ValueError
        transcript.append_message(locked, role=Role.USER, blocks=[TextBlock(text="two")])
        assert seq_of(conversation) == before + 1


def earlier_turns(conversation_id: int, count: int) -> None:
    """`count` finished turns, each a prompt, a call with its result, and a reply; every call
    id `c<n>`."""
    with transaction.atomic():
        locked = transcript.lock(conversation_id)
        for n in range(count):
            for role, blocks in (
                (Role.USER, [TextBlock(text=f"prompt {n}")]),
                (Role.ASSISTANT, [ToolCallBlock(id=f"c{n}", name="calculate", arguments={})]),
                (Role.TOOL, [ToolResultBlock(tool_call_id=f"c{n}", content="2")]),
                (Role.ASSISTANT, [TextBlock(text=f"reply {n}")]),
            ):
                transcript.append_message(locked, role=role, blocks=blocks)


def test_a_tool_step_in_a_long_transcript_reads_its_turn_not_the_transcript(
    user, conversation, monkeypatch
):
    """The open calls are found reading back to the turn's prompt (an answer to a question
    in between is part of the turn); the ids still unique across the whole transcript."""
    from chat import services
    from chat.selectors import NEWEST_FIRST_BATCH
    from tests.factories import count_loaded_messages

    earlier_turns(conversation.pk, 100)
    monkeypatch.setattr(runner, "dispatch", lambda conversation_id: None)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="and now?")
    lease = turns.claim(conversation.pk).lease
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


def test_calls_left_after_a_question_are_found_past_the_answer(user, conversation, model):
    """A question answered mid-turn: the user's reply is part of the turn, so a call made in
    the same step after the question is still found open behind it."""
    earlier_turns(conversation.pk, 60)
    ask(user, conversation, model)
    pending = pending_question(Conversation.objects.get(pk=conversation.pk))
    with transaction.atomic():
        locked = transcript.lock(conversation.pk)
        assert [c.id for c in turns._open_tool_calls(locked)] == [pending.tool_call_id]
    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id=pending.tool_call_id,
        answers=[Answer(labels=["Margherita"])],
    )
    with transaction.atomic():
        assert turns._open_tool_calls(transcript.lock(conversation.pk)) == []
