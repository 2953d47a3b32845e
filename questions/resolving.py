"""Resolving what waits for a person, exactly once: a question answered (by its form, by text
through the API, by an ordinary message), rejected, cancelled, expired; a running tool's
elicitation answered or ended; whom a pending question waits for (assigned, given back when
its assignee leaves, escalated); the reminder before a deadline; and the drafts saved while a
question waits. An approval's decision is questions.approvals', through `resolve` here.

Every resolution locks the conversation (after checking the user may act on it), then
resolves the question's row by a conditional update of a pending row: only one resolution of
a question can win, so a second answer, a double click, a stale id or the loser of a race
between tabs or processes changes nothing and gets QuestionAlreadyResolved. In that same
transaction it rewrites the block the transcript shows, deletes the draft, tells the
listeners (webhooks, mail, push), and moves the turn on (chat.engine.turns), whose next step
dispatch starts after commit. The web views, the API, the terminal client, e-mail links and
Slack's buttons all resolve questions here.

Whom a pending question waits for is its row's alone (docs/developers/architecture.md, "Where
a question's state lives"): an assignment, an escalation or a change of the conversation's
members writes no message, and asks the open pages to render the question's card again
(core.events.refresh).
"""

import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import dispatch, turns
from chat.errors import ConversationNotFound, NothingToStop
from chat.models import AgentState, Conversation, MemberRole, Message, Role
from chat.selectors import acting_ids, conversation_for_user
from chat.transcript import Transcript, lock
from core import events
from questions import notifications
from questions.answers import (
    APPROVALS_PENDING,
    DECLINED,
    EXPIRED_RESULT,
    NOT_RUN_AFTER_DECLINE,
    answer_text,
    answers_by_question_text,
    draft_data,
    form_values,
    reply_text,
    result_for_model,
    validated,
)
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import Question, QuestionDraft, QuestionKind, QuestionStatus
from questions.payloads import (
    ACCEPT,
    API,
    AUTO_RESOLVE,
    BROWSER,
    CANCEL,
    DECLINE,
    EXPIRY,
    Answer,
    Via,
    form_fields,
    replace_block,
)
from questions.selectors import pending_question, question_for_user

# The websocket event a reminder sends to the user's open pages (their attention group).
REMINDER_EVENT = "questions.reminder"
STOPPED_AFTER_REJECT = gettext_noop(
    "You rejected the question, so the agent stopped. Send a message when you want it to go on."
)
# The same for an agent outside Parley (an MCP client), which reads the rejection itself.
REJECTED_EXTERNAL = gettext_noop("You rejected the question. The agent that asked it was told.")

# --- Questions ------------------------------------------------------------------------------


@transaction.atomic
def answer_question(
    *,
    user,
    conversation_id: int,
    tool_call_id: str,
    answers: list[Answer],
    via: Via = BROWSER,
) -> Message:
    """Answer a pending question: one answer per question, in order (a question left out at
    the end counts as unanswered). `via`: the channel the answer came through (the audit).

    Inserts the answer as a new user message (chosen labels one per line, typed text last)
    and resumes the agent. Raises InvalidAnswer, QuestionAlreadyResolved, ConversationNotFound.
    """
    question = _pending(user=user, conversation_id=conversation_id, tool_call_id=tool_call_id)
    return _answer(question, answers, by=user, via=via)


@transaction.atomic
def answer_question_by_text(
    *,
    user,
    conversation_id: int,
    answers: dict[str, str | list[str]],
    tool_call_id: str | None = None,
    via: Via = API,
) -> Message:
    """Answer the pending question with {question text: label, typed text, or a list of
    labels}. With `tool_call_id`, refuse if another question is the pending one."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    question = pending_question(conversation)
    if (
        question is None
        or question.is_tool_request
        or tool_call_id not in (None, question.tool_call_id)
    ):
        raise QuestionAlreadyResolved
    given = answers_by_question_text(question.request, answers)
    return _answer(question, given, by=user, via=via)


@transaction.atomic
def reject_question(*, user, conversation_id: int, tool_call_id: str, via: Via = BROWSER) -> None:
    """Decline a pending question: no message is inserted and the agent stops (idle); the
    model later reads that the user declined."""
    question = _pending(user=user, conversation_id=conversation_id, tool_call_id=tool_call_id)
    _reject(question, by=user, via=via)


@transaction.atomic
def cancel(*, user, conversation_id: int, via: Via = API) -> None:
    """Reject the pending question, or else stop the running turn (the API's `cancel`).
    Raises NothingToStop when there is neither."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    question = pending_question(conversation)
    if question is not None:
        _reject(question, by=user, via=via)
    elif conversation.is_running:
        with Transcript(conversation) as transcript:
            next = turns.stop_turn(transcript)
        dispatch.on_commit(next)
    else:
        raise NothingToStop


def auto_resolve_question(
    transcript: Transcript, *, call: ToolCallBlock, reply: Message, user
) -> dispatch.Next | None:
    """The user sent an ordinary message while the question of `call` was pending: that
    message is the answer (nothing else is inserted) and the agent resumes. In the caller's
    transaction and Transcript (the row is locked). None if the question is not pending."""
    question = (
        Question.objects.select_related("message")
        .filter(
            conversation=transcript.conversation,
            tool_call_id=call.id,
            status=QuestionStatus.PENDING,
        )
        .first()
    )
    if question is None:
        return None
    question.conversation = transcript.conversation
    text = reply_text(reply)
    answers = [Answer(custom=text) for _ in question.request.questions]
    resolve(
        transcript,
        question,
        status=QuestionStatus.AUTO_RESOLVED,
        by=user,
        via=AUTO_RESOLVE,
        answer_text=text,
        reply=reply,
    )
    result = ToolResultBlock(
        tool_call_id=question.tool_call_id,
        content=result_for_model(question.request, answers),
        reply_message_id=reply.pk,
        shown_elsewhere=True,
    )
    return turns.resume(transcript, result=result, asked_in=question.message)


@transaction.atomic
def expire_question(*, question_id: int) -> bool:
    """The server's deadline passed: resolve the question as expired (never picking an
    option), tell the model the user did not answer in time, and resume the agent. Of an
    answer and the expiry exactly one wins. True if this call expired it.

    A pending question whose conversation no longer waits for it (a transcript stored by an
    earlier version) can never be answered: it is cancelled instead, and nothing resumes."""
    conversation_id = (
        Question.objects.filter(pk=question_id).values_list("conversation_id", flat=True).first()
    )
    if conversation_id is None:
        return False
    try:
        conversation = lock(conversation_id)
    except ConversationNotFound:
        return False
    if conversation.deleted_at is not None:  # waits with its conversation (deadlines.sweep)
        return False
    question = Question.objects.select_related("message").filter(pk=question_id).first()
    now = timezone.now()
    if (
        question is None
        or not question.is_pending
        or question.expires_at is None
        or question.expires_at > now
    ):
        return False  # resolved meanwhile, or not due
    question.conversation = conversation
    with Transcript(conversation) as transcript:
        if question.asked_while_running:
            # The running call that asked reads the expiry (an elicitation's as a cancel).
            resolve(transcript, question, status=QuestionStatus.EXPIRED, by=None, via=EXPIRY)
            turns.attention_changed(conversation)
            return True
        if conversation.agent_state != AgentState.AWAITING_USER:
            resolve(transcript, question, status=QuestionStatus.CANCELLED, by=None, via="")
            return False
        resolve(transcript, question, status=QuestionStatus.EXPIRED, by=None, via=EXPIRY)
        if question.kind == QuestionKind.TOOL_APPROVAL:
            # The call will not run (the runner tells the model); the step goes on once no
            # other approval of it waits.
            resume_if_decided(transcript)
            return True
        result = ToolResultBlock.error(question.tool_call_id, EXPIRED_RESULT)
        expired = result.model_copy(update={"shown_elsewhere": True})
        next = turns.resume(transcript, result=expired, asked_in=question.message)
    dispatch.on_commit(next)
    return True


@transaction.atomic
def send_reminder(*, question_id: int) -> bool:
    """Remind the owner once that a question will expire soon: to the listeners (webhooks)
    and to their open pages. The conditional update makes it once across processes."""
    now = timezone.now()
    claimed = Question.objects.filter(
        Q(conversation__agent_state=AgentState.AWAITING_USER)
        | Q(subagent__isnull=False, conversation__agent_state=AgentState.TOOL_EXECUTING),
        pk=question_id,
        status=QuestionStatus.PENDING,
        reminded_at__isnull=True,
        conversation__deleted_at__isnull=True,
    ).update(reminded_at=now)
    if not claimed:
        return False
    question = Question.objects.select_related("conversation").get(pk=question_id)
    notifications.tell(notifications.REMINDER, question, at=now)
    owner_id = question.conversation.owner_id
    events.send_on_commit(
        events.attention_group(owner_id),
        {
            "type": REMINDER_EVENT,
            "conversation_id": question.conversation_id,
            "tool_call_id": question.tool_call_id,
            "expires_at": question.expires_at.isoformat(),
        },
    )
    return True


def _pending(*, user, conversation_id: int, tool_call_id: str) -> Question:
    """The question, its conversation locked, if it is still the pending one."""
    question = question_for_user(
        user=user, conversation_id=conversation_id, tool_call_id=tool_call_id, lock=True
    )
    if not question.is_pending or question.conversation.agent_state != AgentState.AWAITING_USER:
        raise QuestionAlreadyResolved
    return question


def _answer(question: Question, answers: list[Answer], *, by, via: Via) -> Message:
    request = question.request
    answers = validated(request, answers)
    text = answer_text(request, answers)
    with Transcript(question.conversation) as transcript:
        # The inserted user message (spec 5.5): kept in the data and the API, shown by the block.
        reply = transcript.append(
            role=Role.USER, blocks=[TextBlock(text=text, shown_elsewhere=True)], author=by
        )
        resolve(
            transcript,
            question,
            status=QuestionStatus.ANSWERED,
            by=by,
            via=via,
            answers=answers,
            answer_text=text,
            reply=reply,
        )
        result = ToolResultBlock(
            tool_call_id=question.tool_call_id,
            content=result_for_model(request, answers),
            reply_message_id=reply.pk,
            shown_elsewhere=True,
        )
        next = turns.resume(transcript, result=result, asked_in=question.message)
    dispatch.on_commit(next)
    return reply


def _reject(question: Question, *, by, via: Via) -> None:
    """No message is inserted and the agent stops (idle); the model later reads that the
    user declined. Rejecting one approval of a step rejects the others it waits on too."""
    with Transcript(question.conversation) as transcript:
        resolve(transcript, question, status=QuestionStatus.REJECTED, by=by, via=via)
        if question.kind == QuestionKind.TOOL_APPROVAL:
            for other in _pending_approvals(question.conversation, known=[question.message]):
                resolve(transcript, other, status=QuestionStatus.REJECTED, by=by, via=via)
        declined = ToolResultBlock.error(question.tool_call_id, DECLINED)
        turns.decline(
            transcript,
            result=declined.model_copy(update={"shown_elsewhere": True}),
            unrun_result=NOT_RUN_AFTER_DECLINE,
            notice=REJECTED_EXTERNAL if question.conversation.is_external else STOPPED_AFTER_REJECT,
        )


def resolve(
    transcript: Transcript,
    question: Question,
    *,
    status: QuestionStatus,
    by,
    via: str,
    answers: list[Answer] | dict | None = None,
    answer_text: str = "",
    reply: Message | None = None,
) -> None:
    """Resolve the pending `question` (first wins: the conditional update), and in the same
    transaction write its block as the transcript shows it, delete its draft and tell the
    listeners. `answers`: one Answer per question, or an approval's or elicitation's decision
    as stored. Raises QuestionAlreadyResolved if it was no longer pending."""
    now = timezone.now()
    if isinstance(answers, list):
        answers = [a.model_dump() for a in answers]
    resolution = {
        "status": status,
        "answers": answers,
        "answer_text": answer_text,
        "reply": reply,
        "answered_by": by,
        "answered_at": now,
        "answered_via": via,
        "updated_at": now,
    }
    won = Question.objects.filter(pk=question.pk, status=QuestionStatus.PENDING).update(
        **resolution
    )
    if not won:
        raise QuestionAlreadyResolved
    for field, value in resolution.items():
        setattr(question, field, value)
    write_block(transcript, question)
    # A question read by question_for_user knows whether it has a draft; any other, ask.
    if getattr(question, "has_draft", True):
        QuestionDraft.objects.filter(question=question).delete()
    if (event := notifications.resolved_event(question)) is not None:
        notifications.tell(event, question, at=now)
    notifications.question_closed.send(sender=Question, question=question, at=now)


def write_block(transcript: Transcript, question: Question) -> None:
    """Write the question's block, as its row now is, into the message that asked it."""
    message = question.message
    transcript.update(message, blocks=replace_block(parse_blocks(message.blocks), question.block))


def sharing_messages(questions, *, known=()) -> list[Question]:
    """`questions`, those of one message holding one instance of it (and of any message in
    `known`): each block written into it then keeps the blocks written before."""
    messages = {message.pk: message for message in known}
    questions = list(questions)
    for question in questions:
        question.message = messages.setdefault(question.message_id, question.message)
    return questions


def _pending_approvals(conversation: Conversation, *, known=()) -> list[Question]:
    questions = Question.objects.select_related("message").filter(
        conversation=conversation, kind=QuestionKind.TOOL_APPROVAL, status=QuestionStatus.PENDING
    )
    for question in questions:
        question.conversation = conversation
    return sharing_messages(questions, known=known)


def resume_if_decided(transcript: Transcript) -> None:
    """The step that asked for approvals goes on once none of them waits any more."""
    conversation = transcript.conversation
    waiting = Question.objects.filter(
        conversation=conversation,
        kind=QuestionKind.TOOL_APPROVAL,
        status=QuestionStatus.PENDING,
        subagent__isnull=True,  # a sub-agent's call waits for its own, as it runs
    )
    if conversation.agent_state == AgentState.AWAITING_USER and not waiting.exists():
        dispatch.on_commit(turns.resume_tools(transcript))


# --- Elicitations: what a running tool asks ----------------------------------------------------


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
        fields = form_fields(request.requested_schema, request.order)
        stored["content"] = form_values(fields, values or {})
    elif action not in (ACCEPT, DECLINE, CANCEL):
        raise InvalidAnswer(APPROVALS_PENDING)
    status = {
        ACCEPT: QuestionStatus.ANSWERED,
        DECLINE: QuestionStatus.REJECTED,
        CANCEL: QuestionStatus.CANCELLED,
    }[action]
    with Transcript(question.conversation) as transcript:
        resolve(transcript, question, status=status, by=user, via=via, answers=stored)
        turns.attention_changed(question.conversation)
    return question


@transaction.atomic
def end_running_request(conversation_id: int, key: str) -> None:
    """The call that asked is over (it returned, failed, was stopped, or its process died): a
    still pending elicitation of it, or a sub-agent's approval, can no longer be answered, and
    ends as cancelled."""
    question = (
        Question.objects.select_related("message", "conversation")
        .filter(
            Q(kind=QuestionKind.ELICITATION) | Q(subagent__isnull=False),
            conversation_id=conversation_id,
            tool_call_id=key,
            status=QuestionStatus.PENDING,
        )
        .select_for_update(of=("conversation",))
        .first()
    )
    if question is None:
        return
    with Transcript(question.conversation) as transcript:
        resolve(transcript, question, status=QuestionStatus.CANCELLED, by=None, via="")
        turns.attention_changed(question.conversation)


# --- Assigning: whom a pending question waits for ------------------------------------------

NOT_AN_ASSIGNEE = _("Only the conversation’s owner and participants can be assigned a question.")


@transaction.atomic
def assign_question(
    *, user, conversation_id: int, tool_call_id: str, assignee_id: int | None
) -> Question:
    """Assign the pending question to `assignee_id` (the owner or a participant), or with
    None back to everyone who acts in the conversation. Only the owner and participants may;
    the audit records who assigned it and when. Raises InvalidAnswer (not an assignee),
    QuestionAlreadyResolved, NotAllowed, ConversationNotFound."""
    question = _pending(user=user, conversation_id=conversation_id, tool_call_id=tool_call_id)
    if assignee_id is not None and assignee_id not in acting_ids(question.conversation_id):
        raise InvalidAnswer(NOT_AN_ASSIGNEE)
    if _assign(question, assignee_id, by=user):
        _refresh_cards(question.conversation_id, [question])
    return question


def _assign(question: Question, assignee_id: int | None, *, by, escalated: bool = False) -> bool:
    """Record the (re)assignment on the row (the transcript is not written: its card reads
    the row), and tell those it waits for now (notifications, webhooks) and everyone's live
    channels (the counts). The conversation's row is locked by the caller. False if nothing
    changed."""
    if question.assigned_to_id == assignee_id and not escalated:
        return False
    now = timezone.now()
    conversation = question.conversation
    escalate = settings.QUESTION_ESCALATE_AFTER
    fields = {
        "assigned_to_id": assignee_id,
        "assigned_by": by,
        "assigned_at": now,
        # Escalation brings a question assigned to someone else back to the owner.
        "escalate_at": (
            now + timedelta(seconds=escalate)
            if escalate and assignee_id not in (None, conversation.owner_id)
            else None
        ),
        "escalated_at": now if escalated else question.escalated_at,
        "updated_at": now,
    }
    Question.objects.filter(pk=question.pk).update(**fields)
    for field, value in fields.items():
        setattr(question, field, value)
    notifications.tell(notifications.ASSIGNED, question, at=now)
    turns.attention_changed(conversation, waiting=True)
    return True


def members_changed(
    sender, *, conversation: Conversation, user_id: int, role: str | None, **kwargs
) -> None:
    """Someone was added to the conversation, removed, or given another role (a receiver of
    chat.sharing.access_changed; the caller holds the conversation's lock): a question
    assigned to someone who can no longer answer waits for everyone again, and the open pages
    render each pending question's card again with the new choice of assignees. No message is
    written."""
    pending = list(
        Question.objects.filter(conversation=conversation, status=QuestionStatus.PENDING)
    )
    for question in pending:
        question.conversation = conversation
        if question.assigned_to_id == user_id and role != MemberRole.PARTICIPANT:
            _assign(question, None, by=None)
    _refresh_cards(conversation.pk, pending)


def _refresh_cards(conversation_id: int, questions: list[Question]) -> None:
    """After commit, the conversation's open pages render these questions' cards again: their
    rows, or who may answer them, changed, and their blocks did not (core.events.refresh)."""
    message_ids = sorted({q.message_id for q in questions if not q.is_tool_request})
    if message_ids:
        events.send_on_commit(
            events.conversation_group(conversation_id),
            events.refresh(conversation_id, message_ids),
        )


@transaction.atomic
def escalate_question(*, question_id: int) -> bool:
    """QUESTION_ESCALATE_AFTER passed while the question, assigned to someone other than the
    conversation's owner, still waits: it goes to the owner, who is told. Once, across
    processes (the row is claimed under the conversation's lock). True if this call did."""
    conversation_id = (
        Question.objects.filter(pk=question_id).values_list("conversation_id", flat=True).first()
    )
    if conversation_id is None:
        return False
    try:
        conversation = lock(conversation_id)
    except ConversationNotFound:
        return False
    question = Question.objects.filter(pk=question_id).first()
    if (
        question is None
        or not question.is_pending
        or question.escalate_at is None
        or question.escalate_at > timezone.now()
        or conversation.deleted_at is not None
    ):
        return False
    question.conversation = conversation
    _assign(question, conversation.owner_id, by=None, escalated=True)
    _refresh_cards(conversation.pk, [question])
    return True


# --- Drafts: what the user chose or typed, saved while a question waits ----------------------

DRAFT_CLIENT = re.compile(r"[A-Za-z0-9_-]{1,64}")


@transaction.atomic
def save_draft(
    *, user, conversation_id: int, tool_call_id: str, answers: list[Answer], client: str = ""
) -> QuestionDraft | None:
    """Save the user's unsent answer to the pending question, for their other tabs and
    devices; `client` names the page that typed it. A draft never answers: once the question
    is resolved it is ignored and None returned. Raises DraftTooLong, ConversationNotFound."""
    try:
        question = _pending(user=user, conversation_id=conversation_id, tool_call_id=tool_call_id)
    except QuestionAlreadyResolved:
        return None
    data = draft_data(question.request, answers)
    client = client if DRAFT_CLIENT.fullmatch(client) else ""
    draft, _created = QuestionDraft.objects.update_or_create(
        question=question,
        defaults={"user": user, "data": data, "client": client, "updated_at": timezone.now()},
    )
    # Every tab hears of it; the tab that typed it hides the line (static/parley-drafts.js).
    events.send_on_commit(
        events.user_group(user.pk),
        events.conversation_fragment(
            question.conversation_id,
            "questions/question.html#elsewhere",
            {"q": {"tool_call_id": tool_call_id}, "client": client or "-"},
        ),
    )
    return draft
