"""Reads of questions. Access checks happen in chat.selectors, before any of these."""

from dataclasses import dataclass

from chat.blocks import parse_blocks
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import conversations_for_user
from questions.blocks import PENDING, Answer, QuestionPayload, payload_of
from questions.models import QuestionDraft


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


def draft_answers(conversation_id: int, tool_call_id: str) -> list[Answer]:
    """The saved, unsent answer to a question (questions.services.save_draft), if any; the
    caller has checked access to the conversation."""
    draft = QuestionDraft.objects.filter(
        conversation_id=conversation_id, tool_call_id=tool_call_id
    ).first()
    if draft is None or not isinstance(draft.data, list):
        return []
    answers = []
    for item in draft.data:
        try:
            answers.append(Answer.model_validate(item))
        except ValueError:
            answers.append(Answer())
    return answers
