"""Reads of questions. Access checks happen in chat.selectors, before any of these."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from chat.blocks import Block, parse_blocks
from chat.models import AgentState, Conversation, Message
from chat.selectors import assistant_newest_first, conversations_for_user
from questions.blocks import PENDING, Answer, QuestionPayload, payload_of
from questions.models import Deadline, QuestionDraft


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
    return _latest_question(conversation, lambda payload: payload.status == PENDING)


def pending_questions_for_user(*, user) -> list[PendingQuestion]:
    """The user's pending questions in every conversation, the most recently asked first."""
    waiting = conversations_for_user(user=user).filter(agent_state=AgentState.AWAITING_USER)
    pending = [q for c in waiting if (q := pending_question(c)) is not None]
    return sorted(pending, key=lambda q: (q.asked_at, q.conversation_id), reverse=True)


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


def expired_questions_for_user(*, user, limit: int = 100) -> list[PendingQuestion]:
    """The user's questions that expired, most recent deadline first (each found through its
    deadline, then read from its block)."""
    deadlines = (
        Deadline.objects.filter(expired=True, conversation__in=conversations_for_user(user=user))
        .select_related("conversation")
        .order_by("-expires_at")[:limit]
    )
    found = []
    for deadline in deadlines:
        question = question_by_id(deadline.conversation, deadline.tool_call_id)
        if question is not None:
            found.append(question)
    return found


def question_by_id(conversation: Conversation, tool_call_id: str) -> PendingQuestion | None:
    """The question block of the call `tool_call_id`, whatever its state."""
    return _latest_question(conversation, lambda payload: payload.tool_call_id == tool_call_id)


def _latest_question(
    conversation: Conversation, matches: Callable[[QuestionPayload], bool]
) -> PendingQuestion | None:
    """The latest question block of the conversation that `matches`."""
    for message in assistant_newest_first(conversation.pk):
        for index, block in enumerate(parse_blocks(message.blocks)):
            payload = payload_of(block)
            if payload is not None and matches(payload):
                return PendingQuestion(conversation.pk, message, index, payload)
    return None
