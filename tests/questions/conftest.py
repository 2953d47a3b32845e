"""Shared by the question tests: talking to the agent as the user does, and reading back the
question's row and the block the transcript shows for it."""

import pytest

from chat import services
from chat.blocks import parse_blocks
from questions.models import Question
from questions.payloads import payload_of


@pytest.fixture
def say(committed):
    """`say(user, conversation, text)`: the user sends a message, and the turn it starts (or
    resumes) runs to its end, as after the commit. Returns the message; `conversation` is
    read again."""

    def say(user, conversation, text="Lunch?"):
        with committed():
            message = services.post_user_message(
                user=user, conversation_id=conversation.pk, text=text
            )
        conversation.refresh_from_db()
        return message

    return say


def question_row(conversation, call_id="q1") -> Question:
    """The question's row as stored now."""
    return Question.objects.select_related("answered_by").get(
        conversation=conversation, tool_call_id=call_id
    )


def stored_block(question: Question):
    """The question_request block stored in the asking message's JSON, as it is now."""
    message = type(question.message).objects.get(pk=question.message_id)
    [block] = [
        b
        for b in parse_blocks(message.blocks)
        if (p := payload_of(b)) is not None and p.tool_call_id == question.tool_call_id
    ]
    return block


@pytest.fixture
def row():
    """`row(conversation, call_id="q1")`: the question's row as stored now."""
    return question_row


@pytest.fixture
def block_of():
    """`block_of(question)`: the block stored in the asking message for that question."""
    return stored_block
