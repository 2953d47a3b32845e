"""Reads of questions. Access checks happen in chat.selectors, before any of these."""

from dataclasses import dataclass
from datetime import datetime

from chat.blocks import Block, parse_blocks
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

    @property
    def conversation(self) -> Conversation:
        return self.message.conversation  # read with it (pending_question)

    @property
    def block(self) -> Block:
        """The stored question_request block, as the transcript renders it."""
        return parse_blocks(self.message.blocks)[self.block_index]

    @property
    def asked_at(self) -> datetime:
        # Asking is the last change of the message until the question is resolved.
        return self.message.updated_at

    @property
    def key(self) -> str:
        """Unique among the user's questions (tool-call ids are unique per conversation)."""
        return f"{self.conversation_id}-{self.tool_call_id}"


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
    """The user's pending questions in every conversation, the most recently asked first."""
    waiting = conversations_for_user(user=user).filter(agent_state=AgentState.AWAITING_USER)
    pending = [q for c in waiting if (q := pending_question(c)) is not None]
    return sorted(pending, key=lambda q: (q.asked_at, q.conversation_id), reverse=True)
