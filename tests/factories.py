"""Test data written through the same low-level writes the app uses."""

from django.db import transaction

from chat import transcript, turns
from chat.blocks import TextBlock
from chat.models import AgentState, Role


def add_message(conversation_id: int, text: str, *, role=Role.ASSISTANT, message_id=None) -> int:
    """Append a message (or replace the text of `message_id`); returns its id."""
    with transaction.atomic():
        conversation = transcript.lock(conversation_id)
        if message_id is None:
            blocks = [TextBlock(text=text)]
            return transcript.append_message(conversation, role=role, blocks=blocks).pk
        message = conversation.messages.get(pk=message_id)
        transcript.update_message(
            conversation, message, blocks=[TextBlock(text=text)], is_draft=False
        )
        return message_id


def set_state(conversation_id: int, state: AgentState) -> None:
    with transaction.atomic():
        conversation = transcript.lock(conversation_id)
        conversation.agent_state = state
        transcript.save_conversation(conversation)


def fail_turn(conversation_id: int, message: str = turns.AGENT_FAILED) -> None:
    """Put the conversation through a failed turn: error state and a retryable error block."""
    set_state(conversation_id, AgentState.LLM_REQUESTING)
    turns.fail(turns.claim(conversation_id).lease, message)
