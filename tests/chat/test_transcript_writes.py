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
