"""Reads of questions. Access checks happen in chat.selectors, before any of these."""

from dataclasses import dataclass

from chat.blocks import parse_blocks
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import conversations_for_user
from questions.blocks import PENDING, QuestionPayload, payload_of


@dataclass(frozen=True)
class PendingQuestion:
    """A question waiting for its answer, and where its block is stored."""

    conversation_id: int
    message: Message
    block_index: int
    payload: QuestionPayload

    @property
    def tool_call_id(self) -> str:
        return self.payload.tool_call_id


def pending_question(conversation: Conversation) -> PendingQuestion | None:
    """The conversation's pending question, if it waits for one."""
    if conversation.agent_state != AgentState.AWAITING_USER:
        return None
    for message in conversation.messages.filter(role=Role.ASSISTANT).order_by("-order"):
        for index, block in enumerate(parse_blocks(message.blocks)):
            payload = payload_of(block)
            if payload is not None and payload.status == PENDING:
                return PendingQuestion(conversation.pk, message, index, payload)
    return None


def pending_questions_for_user(*, user) -> list[PendingQuestion]:
    """The user's pending questions in every conversation, most recently active first."""
    waiting = conversations_for_user(user=user).filter(agent_state=AgentState.AWAITING_USER)
    return [q for c in waiting if (q := pending_question(c)) is not None]
