"""Resolving a question, exactly once: answer, reject, or auto-resolve by an ordinary message.

Each service locks the conversation (after checking the user may act on it) and finds the
question by its tool-call id; only a question still pending can be resolved, so a second
answer, a double click, a stale id or the loser of a race between tabs or processes changes
nothing and gets QuestionAlreadyResolved.
"""

import json

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from chat import transcript, turns
from chat.blocks import ActionBlock, TextBlock, ToolResultBlock, parse_blocks
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import conversation_for_user
from questions.blocks import PENDING, Answer, is_question_block, request_of, resolved_block
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.schemas import (
    TOOL_ASK_USER_QUESTION,
    TOOL_CONFIRM_ACTION,
    TOOL_QUESTION,
    YES,
    QuestionRequest,
    clean_text,
)

DECLINED = "The user declined to answer this question."

NOT_AN_OPTION = _("Pick one of the options shown.")
ONE_CHOICE = _("This question takes a single choice.")
OPTIONS_ONLY = _("This question takes one of its options, not a typed answer.")
TOO_LONG = _("That answer is too long.")
EMPTY = _("Choose an option or type an answer first.")


@transaction.atomic
def answer_question(
    *, user, conversation_id: int, tool_call_id: str, answers: list[Answer]
) -> Message:
    """Answer a pending question: one answer per question, in order.

    Inserts the answer as a new user message (chosen labels one per line, typed text last)
    and resumes the agent. Raises InvalidAnswer, QuestionAlreadyResolved, ConversationNotFound.
    """
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    pending = _pending(conversation, tool_call_id)
    request = request_of(pending[2])
    answers = _validate(request, answers)
    text = answer_text(request, answers)
    reply = transcript.append_message(conversation, role=Role.USER, blocks=[TextBlock(text=text)])
    _replied(conversation, pending, request, answers, text=text, reply=reply)
    return reply


@transaction.atomic
def reject_question(*, user, conversation_id: int, tool_call_id: str) -> None:
    """Decline a pending question: no message is inserted and the agent stops (idle); the
    model later reads that the user declined."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    message, index, block = _pending(conversation, tool_call_id)
    _replace_block(conversation, message, index, resolved_block(block, replied=False))
    turns.resolve_question(
        conversation,
        result=ToolResultBlock(tool_call_id=tool_call_id, content=DECLINED, is_error=True),
        answered=False,
    )


def auto_resolve_question(*, conversation: Conversation, reply: Message) -> None:
    """The user sent an ordinary message while a question was pending: that message is the
    answer (nothing else is inserted) and the agent resumes. The caller holds the row lock."""
    pending = pending_question(conversation)
    if pending is None:
        return
    request = request_of(pending[2])
    text = "\n".join(b.text for b in parse_blocks(reply.blocks) if isinstance(b, TextBlock))
    answers = [Answer(custom=text) for _ in request.questions]
    _replied(conversation, pending, request, answers, text=text, reply=reply)


def pending_question(conversation: Conversation) -> tuple[Message, int, ActionBlock] | None:
    """The conversation's pending question: its message, block index and block."""
    if conversation.agent_state != AgentState.AWAITING_USER:
        return None
    for message in conversation.messages.filter(role=Role.ASSISTANT).order_by("-order"):
        for index, block in enumerate(parse_blocks(message.blocks)):
            if is_question_block(block) and block.status == PENDING:
                return message, index, block
    return None


def answer_text(request: QuestionRequest, answers: list[Answer]) -> str:
    """The user message an answer inserts (seed 000): labels one per line, typed text last;
    with several questions, one line per question."""

    def parts(question, answer: Answer) -> list[str]:
        if answer.custom and not question.multiple:
            return [answer.custom]  # single choice: typed text is the answer on its own
        return [*answer.labels, *([answer.custom] if answer.custom else [])]

    if len(request.questions) == 1:
        return "\n".join(parts(request.questions[0], answers[0]))
    return "\n".join(
        f"{q.header or q.text}: {', '.join(parts(q, a))}"
        for q, a in zip(request.questions, answers, strict=True)
    )


def result_for_model(request: QuestionRequest, answers: list[Answer]) -> str:
    """What the model receives (README, "What the model receives")."""
    if request.tool == TOOL_QUESTION:
        return answer_text(request, answers)
    if request.tool == TOOL_ASK_USER_QUESTION:
        result = {}
        for question, answer in zip(request.questions, answers, strict=True):
            if question.multiple:
                result[question.text] = [
                    *answer.labels,
                    *([answer.custom] if answer.custom else []),
                ]
            else:
                result[question.text] = answer.custom or (answer.labels[0] if answer.labels else "")
        return json.dumps({"answers": result}, ensure_ascii=False)
    if request.tool == TOOL_CONFIRM_ACTION:
        [answer] = answers
        if answer.labels:
            return json.dumps({"confirmed": answer.labels[0] == YES})
        # An ordinary message instead of Yes/No: the model reads it and decides.
        return json.dumps({"confirmed": None, "userReply": answer.custom}, ensure_ascii=False)
    raise ValueError(request.tool)  # pragma: no cover


def _replied(conversation, pending, request, answers: list[Answer], *, text: str, reply) -> None:
    """Mark the question replied by `reply`, store its tool result, resume the agent."""
    message, index, block = pending
    resolved = resolved_block(
        block, replied=True, answer_text=text, answer_message_id=reply.pk, answers=answers
    )
    _replace_block(conversation, message, index, resolved)
    result = ToolResultBlock(
        tool_call_id=block.extra["toolCallId"], content=result_for_model(request, answers)
    )
    turns.resolve_question(conversation, result=result, answered=True)


def _pending(conversation: Conversation, tool_call_id: str) -> tuple[Message, int, ActionBlock]:
    pending = pending_question(conversation)
    if pending is None or pending[2].extra.get("toolCallId") != tool_call_id:
        raise QuestionAlreadyResolved
    return pending


def _validate(request: QuestionRequest, answers: list[Answer]) -> list[Answer]:
    if len(answers) != len(request.questions):
        raise InvalidAnswer
    cleaned = []
    for question, answer in zip(request.questions, answers, strict=True):
        custom = clean_text(answer.custom, multiline=True)
        labels = list(dict.fromkeys(answer.labels))  # a label chosen twice counts once
        if any(label not in question.labels for label in labels):
            raise InvalidAnswer(NOT_AN_OPTION)
        if len(labels) > 1 and not question.multiple:
            raise InvalidAnswer(ONE_CHOICE)
        if custom and not question.custom:
            raise InvalidAnswer(OPTIONS_ONLY)
        if len(custom) > settings.PARLEY_MAX_MESSAGE_CHARS:
            raise InvalidAnswer(TOO_LONG)
        if not labels and not custom:
            raise InvalidAnswer(EMPTY)
        cleaned.append(Answer(labels=labels, custom=custom))
    return cleaned


def _replace_block(conversation, message: Message, index: int, block: ActionBlock) -> None:
    blocks = parse_blocks(message.blocks)
    blocks[index] = block
    transcript.update_message(conversation, message, blocks=blocks, is_draft=False)
