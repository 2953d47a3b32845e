"""Approvals and elicitations (questions.approvals), asked and resolved exactly once.

An approval pauses the turn like a question. Several calls of one step that need approval are
asked together, one row each, and the step goes on (turns.resume_tools) once every one of
them is decided; the runner then reads each call's decision (`decision_for`) and runs, denies
or skips it. An elicitation does not pause the turn: the tool that asked is still running,
and waits for the row's resolution itself (mcp_client).

Resolution is the same first-wins conditional update of a pending row as for questions
(questions.services._resolve), in the transaction that rewrites the block.
"""

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Subquery
from django.utils.translation import gettext_noop

from chat.blocks import TextBlock, ToolCallBlock
from chat.engine import dispatch, turns
from chat.models import AgentState, Conversation
from chat.transcript import Transcript
from core.text import clean_text
from questions import notifications
from questions.approvals import (
    ACCEPT,
    ALLOW,
    ALWAYS,
    CANCEL,
    DECLINE,
    DENY,
    FEEDBACK_TOO_LONG,
    MAX_FEEDBACK_CHARS,
    ApprovalRequest,
    ElicitationRequest,
    InvalidInput,
    edited_arguments,
    form_fields,
    form_values,
    parse_arguments,
)
from questions.blocks import AUTO_RESOLVE, BROWSER, Via
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import Question, QuestionKind, QuestionStatus, ToolPermission
from questions.selectors import question_for_user
from questions.services import (
    _publish,
    _resolve,
    new_question,
    new_questions,
    resume_if_decided,
)

# The notice an approval's deny leaves is the model's result; nothing stops the turn.
APPROVALS_PENDING = gettext_noop("Decide every tool call the agent asked to make.")


@dataclass(frozen=True)
class Decided:
    """How a call's approval ended, for the runner: `decision` allow, always or deny; None
    when nobody decided in time (expired) or it was cancelled."""

    status: str
    decision: str | None
    arguments: dict | None  # the edited arguments, if the person edited them
    feedback: str


# --- Approvals ---------------------------------------------------------------------------------


@transaction.atomic
def ask_approvals(lease: turns.Lease, asks: list[tuple[ToolCallBlock, ApprovalRequest]]) -> bool:
    """Show one approval per (call, request) under the calls' message and pause the turn until
    all are decided, with the owner's question deadline. True once paused."""
    rows = new_questions(
        lease.conversation_id,
        [
            {
                "tool_call_id": call.id,
                "kind": QuestionKind.TOOL_APPROVAL,
                "questions": [request.model_dump(mode="json")],
            }
            for call, request in asks
        ],
    )
    now = rows[0].created_at
    paused = turns.pause(lease, asks[0][0], *(row.block for row in rows))
    if paused is None:  # pragma: no cover - approvals have no pause limit
        return False
    for row in rows:
        row.conversation = paused.conversation
        row.message = paused.message
    Question.objects.bulk_create(rows)
    for row in rows:
        _publish(notifications.APPROVAL_REQUESTED, row, at=now)
    return True


def decision_for(conversation_id: int, call_id: str) -> Decided | None:
    """The decision on the call's approval, or None if it was never asked (or is pending)."""
    row = (
        Question.objects.filter(
            conversation_id=conversation_id, tool_call_id=call_id, kind=QuestionKind.TOOL_APPROVAL
        )
        .exclude(status=QuestionStatus.PENDING)
        .only("status", "answers")
        .first()
    )
    if row is None:
        return None
    decided = row.answers if isinstance(row.answers, dict) else {}
    return Decided(
        status=row.status,
        decision=decided.get("decision"),
        arguments=decided.get("arguments"),
        feedback=decided.get("feedback", ""),
    )


def always_allowed(conversation_id: int, tool: str) -> bool:
    """Whether the person who started the conversation's running turn always allows `tool`
    (one query). Nobody's "Always allow" counts in a turn someone else started: in a shared
    conversation, a participant's request asks as ever, whatever the owner chose."""
    started_by = Conversation.objects.filter(pk=conversation_id).values("turn_started_by")
    return ToolPermission.objects.filter(tool=tool, user=Subquery(started_by[:1])).exists()


@transaction.atomic
def decide(
    *,
    user,
    conversation_id: int,
    tool_call_id: str,
    decision: str,
    arguments: str | dict | None = None,
    feedback: str = "",
    via: Via = BROWSER,
) -> Question:
    """Decide a pending approval: allow (with `arguments` edited, as JSON text or an object,
    checked against the tool's input schema), always (allow, and never ask again about this
    tool in the turns this user starts: always_allowed), or deny (with optional `feedback`
    for the model). The step goes on once its last approval is decided. Raises InvalidAnswer,
    NestedTooDeeply, QuestionAlreadyResolved, ConversationNotFound."""
    question = _pending_approval(
        user=user, conversation_id=conversation_id, tool_call_id=tool_call_id
    )
    request = question.approval
    stored: dict[str, Any] = {"decision": decision}
    try:
        if decision in (ALLOW, ALWAYS):
            if isinstance(arguments, str) and arguments.strip():
                stored["arguments"] = parse_arguments(arguments, request.input_schema)
            elif isinstance(arguments, dict):
                stored["arguments"] = edited_arguments(arguments, request.input_schema)
            if stored.get("arguments") == request.arguments:
                del stored["arguments"]  # unchanged: not an edit
        elif decision == DENY:
            text = clean_text(feedback or "", multiline=True)
            if len(text) > MAX_FEEDBACK_CHARS:
                raise InvalidInput(FEEDBACK_TOO_LONG)
            if text:
                stored["feedback"] = text
        else:
            raise InvalidInput(APPROVALS_PENDING)
    except InvalidInput as error:
        raise InvalidAnswer(str(error)) from None
    status = QuestionStatus.REJECTED if decision == DENY else QuestionStatus.ANSWERED
    with Transcript(question.conversation) as transcript:
        _resolve(transcript, question, status=status, by=user, via=via, answers=stored)
        if decision == ALWAYS:
            ToolPermission.objects.get_or_create(user=user, tool=request.name)
        resume_if_decided(transcript)
    return question


def deny_by_message(transcript: Transcript, reply, user) -> dispatch.Next | None:
    """The person sent a message while approvals wait: it denies them all, as their feedback
    (chat.engine.tools.resolve_pauses_by_message)."""
    text = "\n".join(b.text for b in reply.parsed_blocks if isinstance(b, TextBlock))
    return deny_all(transcript, user=user, via=AUTO_RESOLVE, feedback=text, reply=reply)


def deny_all(
    transcript: Transcript, *, user, via: Via, feedback: str = "", reply=None
) -> dispatch.Next | None:
    """Deny every pending approval of the conversation, in the caller's transaction and
    Transcript; the step goes on with each call denied. None if none was pending."""
    pending = list(
        Question.objects.select_related("message").filter(
            conversation=transcript.conversation,
            kind=QuestionKind.TOOL_APPROVAL,
            status=QuestionStatus.PENDING,
        )
    )
    if not pending:
        return None
    stored = {"decision": DENY, **({"feedback": feedback} if feedback else {})}
    for question in pending:
        question.conversation = transcript.conversation
        _resolve(
            transcript,
            question,
            status=QuestionStatus.REJECTED,
            by=user,
            via=via,
            answers=stored,
            answer_text=feedback,
            reply=reply,
        )
    return turns.resume_tools(transcript)


def _pending_approval(*, user, conversation_id: int, tool_call_id: str) -> Question:
    question = question_for_user(
        user=user, conversation_id=conversation_id, tool_call_id=tool_call_id, lock=True
    )
    if (
        question.kind != QuestionKind.TOOL_APPROVAL
        or not question.is_pending
        or question.conversation.agent_state != AgentState.AWAITING_USER
    ):
        raise QuestionAlreadyResolved
    return question


# --- Elicitations ------------------------------------------------------------------------------


@transaction.atomic
def ask_elicitation(
    lease: turns.Lease, call: ToolCallBlock, request: ElicitationRequest, *, key: str
) -> Question:
    """Show the running call's elicitation under its message (the turn keeps running: the
    tool waits), with the owner's question deadline (and no reminder: the call is waiting).
    `key`: the row's id in the conversation."""
    question = new_question(
        lease.conversation_id,
        tool_call_id=key,
        kind=QuestionKind.ELICITATION,
        questions=[request.model_dump(mode="json")],
    )
    question.remind_at = None
    now = question.created_at
    question.message = turns.show_action(lease, call, question.block)
    question.save(force_insert=True)
    _publish(notifications.ASKED, question, at=now)
    return question


@transaction.atomic
def answer_elicitation(
    *,
    user,
    conversation_id: int,
    tool_call_id: str,
    action: str,
    values: dict[str, Any] | None = None,
    via: Via = BROWSER,
) -> Question:
    """Answer a running tool's elicitation: accept (with the form's `values`, converted and
    checked against its schema), decline or cancel. The tool reads the row. Raises
    InvalidAnswer, QuestionAlreadyResolved, ConversationNotFound."""
    question = question_for_user(
        user=user, conversation_id=conversation_id, tool_call_id=tool_call_id, lock=True
    )
    if question.kind != QuestionKind.ELICITATION or not question.is_pending:
        raise QuestionAlreadyResolved
    request = question.elicitation
    stored: dict[str, Any] = {"action": action}
    if action == ACCEPT and request.mode == "form":
        try:
            fields = form_fields(request.requested_schema, request.order)
            stored["content"] = form_values(fields, values or {})
        except InvalidInput as error:
            raise InvalidAnswer(str(error)) from None
    elif action not in (ACCEPT, DECLINE, CANCEL):
        raise InvalidAnswer(APPROVALS_PENDING)
    status = {
        ACCEPT: QuestionStatus.ANSWERED,
        DECLINE: QuestionStatus.REJECTED,
        CANCEL: QuestionStatus.CANCELLED,
    }[action]
    with Transcript(question.conversation) as transcript:
        _resolve(transcript, question, status=status, by=user, via=via, answers=stored)
        turns.attention_changed(question.conversation)
    return question


@transaction.atomic
def end_elicitation(conversation_id: int, key: str) -> None:
    """The call that asked is over (it returned, failed, or its process died): a still
    pending elicitation of it can no longer be answered, and ends as cancelled."""
    question = (
        Question.objects.select_related("message", "conversation")
        .filter(
            conversation_id=conversation_id,
            tool_call_id=key,
            kind=QuestionKind.ELICITATION,
            status=QuestionStatus.PENDING,
        )
        .select_for_update(of=("conversation",))
        .first()
    )
    if question is None:
        return
    with Transcript(question.conversation) as transcript:
        _resolve(transcript, question, status=QuestionStatus.CANCELLED, by=None, via="")
        turns.attention_changed(question.conversation)


def pending_elicitation_keys(conversation_id: int, call_id: str) -> list[str]:
    """The keys of the call's elicitations still pending (a call its process left behind)."""
    return [
        question.tool_call_id
        for question in Question.objects.filter(
            conversation_id=conversation_id,
            kind=QuestionKind.ELICITATION,
            status=QuestionStatus.PENDING,
        ).only("tool_call_id", "questions")
        if question.elicitation.call_id == call_id
    ]


def elicitation_outcome(conversation_id: int, key: str) -> tuple[str, dict | None] | None:
    """(action, content) once the elicitation is resolved; None while it is pending. Expired
    and cancelled ones are a cancel."""
    row = (
        Question.objects.filter(conversation_id=conversation_id, tool_call_id=key)
        .only("status", "answers")
        .first()
    )
    if row is None:
        return CANCEL, None
    if row.status == QuestionStatus.PENDING:
        return None
    decided = row.answers if isinstance(row.answers, dict) else {}
    action = decided.get("action") if row.status != QuestionStatus.EXPIRED else CANCEL
    return action or CANCEL, decided.get("content")


def revoke_permission(*, user, tool: str) -> bool:
    """Take back the user's "Always allow" of `tool`: its calls ask them again. False if there
    was none."""
    deleted, _ = ToolPermission.objects.filter(user=user, tool=tool).delete()
    return bool(deleted)
