"""Resolving a question, exactly once: answer, reject, or auto-resolve by an ordinary message.

Each service locks the conversation (after checking the user may act on it) and finds the
question by its tool-call id; only a question still pending can be resolved, so a second
answer, a double click, a stale id or the loser of a race between tabs or processes changes
nothing and gets QuestionAlreadyResolved. The web views, the API and (through the API) the
terminal client all resolve questions here.
"""

import json
import re
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from accounts.selectors import preferences_for
from chat import events, transcript, turns
from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.compiled import CompiledDelete
from chat.errors import ConversationNotFound, NothingToStop
from chat.models import Conversation, Message, Role
from chat.selectors import conversation_for_user
from chat.text import clean_text
from questions import blocks, notifications
from questions.blocks import API, AUTO_RESOLVE, BROWSER, EXPIRY, Answer, Resolver, Via
from questions.errors import DraftTooLong, InvalidAnswer, QuestionAlreadyResolved
from questions.models import Deadline, QuestionDraft
from questions.schemas import (
    TOOL_ASK_USER_QUESTION,
    TOOL_CONFIRM_ACTION,
    TOOL_QUESTION,
    YES,
    QuestionRequest,
)
from questions.selectors import PendingQuestion, pending_question

# What the model reads when the user rejects its question, and for calls it made after it.
DECLINED = "The user declined to answer this question."
NOT_RUN_AFTER_DECLINE = "Not run: the user declined the question asked before this call."
EXPIRED_RESULT = (
    "The user did not answer this question in time: it expired. Proceed with your best "
    "judgement, and state the assumptions you make."
)
# The websocket event a reminder sends to the user's open pages (chat.events' user group).
REMINDER_EVENT = "questions.reminder"
STOPPED_AFTER_REJECT = gettext_noop(
    "You rejected the question, so the agent stopped. Send a message when you want it to go on."
)

NOT_AN_OPTION = _("Pick one of the options shown.")
ONE_CHOICE = _("This question takes a single choice.")
CHOICE_OR_TYPED = _("Choose an option or send your own answer, not both.")
OPTIONS_ONLY = _("This question takes one of its options, not a typed answer.")
TOO_LONG = _("That answer is too long.")
EMPTY = _("Choose an option or type an answer first.")
TOO_MANY_ANSWERS = _("There are more answers than questions.")
NO_SUCH_QUESTION = _("No such question: %(text)s")
MISSING_ANSWER = _("Missing an answer to: %(text)s")

# Deleted with each answer (_store): what was typed but not sent is gone with the question
# (no signal receiver watches it: tests/chat/test_compiled.py).
_DELETE_DRAFT = CompiledDelete(
    lambda conversation_id, tool_call_id: QuestionDraft.objects.filter(
        conversation_id=conversation_id, tool_call_id=tool_call_id
    )
)


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
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    pending = _pending(conversation, tool_call_id)
    return _answer(conversation, pending, answers, by=_resolver(user, via))


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
    labels} (seed 001). With `tool_call_id`, refuse if another question is the pending one."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    pending = pending_question(conversation)
    if pending is None or tool_call_id not in (None, pending.tool_call_id):
        raise QuestionAlreadyResolved
    return _answer(
        conversation,
        pending,
        answers_by_question_text(pending.payload.request, answers),
        by=_resolver(user, via),
    )


@transaction.atomic
def reject_question(*, user, conversation_id: int, tool_call_id: str, via: Via = BROWSER) -> None:
    """Decline a pending question: no message is inserted and the agent stops (idle); the
    model later reads that the user declined."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    _reject(conversation, _pending(conversation, tool_call_id), by=_resolver(user, via))


@transaction.atomic
def cancel(*, user, conversation_id: int, via: Via = API) -> None:
    """Reject the pending question, or else stop the running turn (the API's `cancel`).
    Raises NothingToStop when there is neither."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    pending = pending_question(conversation)
    if pending is not None:
        _reject(conversation, pending, by=_resolver(user, via))
    elif conversation.is_running:
        turns.stop_turn(conversation)
    else:
        raise NothingToStop


@transaction.atomic
def ask(lease: turns.Lease, call: ToolCallBlock, request: QuestionRequest, *, limit: int) -> bool:
    """Show the question under `call` and pause the turn (chat.turns.pause), fixing its
    deadline now if the owner's questions expire (QUESTION_EXPIRE_AFTER or their own
    setting). False, and nothing changes, if the turn already asked `limit` questions."""
    conversation = Conversation.objects.select_related("owner").filter(pk=lease.conversation_id)
    conversation = conversation.first()
    if conversation is None:
        raise ConversationNotFound
    now = timezone.now()
    seconds = expire_after(conversation.owner)
    expires_at = now + timedelta(seconds=seconds) if seconds else None
    payload = blocks.asked(tool_call_id=call.id, request=request, expires_at=expires_at)
    if not turns.pause(lease, call, blocks.question_block(payload), limit=limit):
        return False
    if expires_at is not None:
        Deadline.objects.create(
            conversation=conversation,
            tool_call_id=call.id,
            expires_at=expires_at,
            remind_at=remind_at(expires_at, seconds),
        )
    notifications.publish(
        notifications.QuestionEvent(
            type=notifications.ASKED,
            conversation_id=conversation.pk,
            owner_id=conversation.owner_id,
            payload=payload,
            at=now,
        )
    )
    return True


def expire_after(user) -> int | None:
    """Seconds a question asked of `user` stays open: their own setting, else the server's
    QUESTION_EXPIRE_AFTER; None (or 0 in either) means never."""
    own = preferences_for(user).question_expire_after
    seconds = own if own is not None else settings.QUESTION_EXPIRE_AFTER
    return seconds or None


def remind_at(expires_at: datetime, seconds: int) -> datetime | None:
    """When to remind: QUESTION_REMIND_BEFORE seconds before the deadline (by default a fifth
    of the time before it, that is at 80%); None for no reminder (0, or not before the ask)."""
    before = settings.QUESTION_REMIND_BEFORE
    before = seconds / 5 if before is None else before
    if not before or before >= seconds:
        return None
    return expires_at - timedelta(seconds=before)


@transaction.atomic
def expire_question(*, conversation_id: int, tool_call_id: str) -> bool:
    """The server's deadline passed: resolve the question as expired (never picking an
    option), tell the model the user did not answer in time, and resume the agent. Like an
    answer, it locks the conversation and acts only on the question still pending, so of an
    answer and the expiry exactly one wins. True if this call expired it."""
    try:
        conversation = transcript.lock(conversation_id)
    except ConversationNotFound:
        return False
    now = timezone.now()
    pending = pending_question(conversation)
    if (
        pending is None
        or pending.tool_call_id != tool_call_id
        or pending.payload.expires_at is None
        or pending.payload.expires_at > now
    ):
        # Resolved in the meantime (its deadline was closed then) or not due: nothing to do.
        return False
    by = Resolver(answered_by=None, answered_at=now, answered_via=EXPIRY)
    _store(conversation, pending, blocks.expired(pending.payload, by=by))
    result = ToolResultBlock.error(tool_call_id, EXPIRED_RESULT)
    turns.resume(conversation, result=result.model_copy(update={"shown_elsewhere": True}))
    return True


@transaction.atomic
def send_reminder(*, deadline_id: int) -> bool:
    """Remind the owner once that a question will expire soon: to the listeners (webhooks)
    and to their open pages. The conditional update makes it once across processes."""
    now = timezone.now()
    claimed = Deadline.objects.filter(
        pk=deadline_id, reminded_at__isnull=True, resolved_at__isnull=True
    ).update(reminded_at=now)
    if not claimed:
        return False
    deadline = Deadline.objects.select_related("conversation").get(pk=deadline_id)
    conversation = deadline.conversation
    pending = pending_question(conversation)
    if pending is None or pending.tool_call_id != deadline.tool_call_id:
        return False
    notifications.publish(
        notifications.QuestionEvent(
            type=notifications.REMINDER,
            conversation_id=conversation.pk,
            owner_id=conversation.owner_id,
            payload=pending.payload,
            at=now,
        )
    )
    events.send_attention_event_on_commit(
        conversation.owner_id,
        {
            "type": REMINDER_EVENT,
            "conversation_id": conversation.pk,
            "tool_call_id": deadline.tool_call_id,
            "expires_at": deadline.expires_at.isoformat(),
        },
    )
    return True


def auto_resolve_question(*, conversation: Conversation, reply: Message) -> bool:
    """The user sent an ordinary message while a question was pending: that message is the
    answer (nothing else is inserted) and the agent resumes. The caller holds the row lock.
    True if a question was resolved."""
    pending = pending_question(conversation)
    if pending is None:
        return False
    text = "\n".join(b.text for b in parse_blocks(reply.blocks) if isinstance(b, TextBlock))
    answers = [Answer(custom=text) for _ in pending.payload.questions]
    by = _resolver(conversation.owner, AUTO_RESOLVE)
    _replied(conversation, pending, answers, text=text, reply=reply, by=by, by_message=True)
    return True


def answers_by_question_text(
    request: QuestionRequest, given: dict[str, str | list[str]]
) -> list[Answer]:
    """Map {question text: label, typed text or list of labels} onto the questions, in order;
    a value that is not one of the question's labels is typed text."""
    unknown = set(given) - {q.text for q in request.questions}
    if unknown:
        raise InvalidAnswer(NO_SUCH_QUESTION % {"text": sorted(unknown)[0]})
    answers = []
    for question in request.questions:
        if question.text not in given:
            raise InvalidAnswer(MISSING_ANSWER % {"text": question.text})
        value = given[question.text]
        values = value if isinstance(value, list) else [value]
        labels = [v for v in values if v in question.labels]
        typed = [v for v in values if v not in question.labels]
        answers.append(Answer(labels=labels, custom="\n".join(typed)))
    return answers


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


def _answer(
    conversation: Conversation, pending: PendingQuestion, answers: list[Answer], *, by: Resolver
) -> Message:
    answers = _validate(pending.payload.request, answers)
    text = answer_text(pending.payload.request, answers)
    # Seed 000's inserted user message: kept in the data and the API, shown by the block.
    inserted = TextBlock(text=text, shown_elsewhere=True)
    with transcript.one_write(conversation):
        reply = transcript.append_message(conversation, role=Role.USER, blocks=[inserted])
        _replied(conversation, pending, answers, text=text, reply=reply, by=by)
    return reply


def _replied(
    conversation: Conversation,
    pending: PendingQuestion,
    answers: list[Answer],
    *,
    text: str,
    reply: Message,
    by: Resolver,
    by_message: bool = False,
) -> None:
    """Mark the question replied by `reply`, store its tool result, resume the agent. An
    ordinary message (`by_message`) shows itself: the block then stores no per-question
    answers, so the reply appears once."""
    payload = blocks.replied(
        pending.payload,
        answer_text=text,
        answer_message_id=reply.pk,
        answers=None if by_message else answers,
        by=by,
    )
    _store(conversation, pending, payload)
    result = ToolResultBlock(
        tool_call_id=pending.tool_call_id,
        content=result_for_model(payload.request, answers),
        reply_message_id=reply.pk,
        shown_elsewhere=True,
    )
    turns.resume(conversation, result=result)


def _reject(conversation: Conversation, pending: PendingQuestion, *, by: Resolver) -> None:
    """No message is inserted and the agent stops (idle); the model later reads that the
    user declined."""
    _store(conversation, pending, blocks.rejected(pending.payload, by=by))
    turns.decline(
        conversation,
        result=ToolResultBlock.error(pending.tool_call_id, DECLINED).model_copy(
            update={"shown_elsewhere": True}
        ),
        unrun_result=NOT_RUN_AFTER_DECLINE,
        notice=STOPPED_AFTER_REJECT,
    )


def _pending(conversation: Conversation, tool_call_id: str) -> PendingQuestion:
    pending = pending_question(conversation)
    if pending is None or pending.tool_call_id != tool_call_id:
        raise QuestionAlreadyResolved
    return pending


def _validate(request: QuestionRequest, answers: list[Answer]) -> list[Answer]:
    if len(answers) > len(request.questions):
        raise InvalidAnswer(TOO_MANY_ANSWERS)
    answers = [*answers, *[Answer()] * (len(request.questions) - len(answers))]
    cleaned = []
    for question, answer in zip(request.questions, answers, strict=True):
        custom = clean_text(answer.custom, multiline=True)
        labels = list(dict.fromkeys(answer.labels))  # a label chosen twice counts once
        if any(label not in question.labels for label in labels):
            raise InvalidAnswer(NOT_AN_OPTION)
        if len(labels) > 1 and not question.multiple:
            raise InvalidAnswer(ONE_CHOICE)
        if labels and custom and not question.multiple:
            raise InvalidAnswer(CHOICE_OR_TYPED)
        if custom and not question.custom:
            raise InvalidAnswer(OPTIONS_ONLY)
        if len(custom) > settings.PARLEY_MAX_MESSAGE_CHARS:
            raise InvalidAnswer(TOO_LONG)
        if not labels and not custom:
            raise InvalidAnswer(EMPTY)
        cleaned.append(Answer(labels=labels, custom=custom))
    return cleaned


def _resolver(user, via: Via) -> Resolver:
    return Resolver(answered_by=user.get_username(), answered_at=timezone.now(), answered_via=via)


def _store(
    conversation: Conversation, pending: PendingQuestion, payload: blocks.QuestionPayload
) -> None:
    """Write the resolved question's block, close its deadline and tell the listeners
    (notifications), all in the caller's transaction."""
    stored = parse_blocks(pending.message.blocks)
    stored[pending.block_index] = blocks.question_block(payload)
    transcript.update_message(conversation, pending.message, blocks=stored, is_draft=False)
    _DELETE_DRAFT(conversation_id=conversation.pk, tool_call_id=pending.tool_call_id)
    if pending.payload.expires_at is not None:  # else it has no deadline (ask)
        Deadline.objects.filter(
            conversation=conversation, tool_call_id=payload.tool_call_id, resolved_at__isnull=True
        ).update(
            resolved_at=payload.answered_at, expired=payload.question_resolution == blocks.EXPIRED
        )
    notifications.publish(
        notifications.QuestionEvent(
            type=notifications.RESOLVED[payload.question_resolution],
            conversation_id=conversation.pk,
            owner_id=conversation.owner_id,
            payload=payload,
            at=payload.answered_at,
        )
    )


# --- Drafts: what the user chose or typed, saved while a question waits ----------------------

DRAFT_CLIENT = re.compile(r"[A-Za-z0-9_-]{1,64}")


@transaction.atomic
def save_draft(
    *, user, conversation_id: int, tool_call_id: str, answers: list[Answer], client: str = ""
) -> QuestionDraft | None:
    """Save the user's unsent answer to the pending question, for their other tabs and
    devices; `client` names the page that typed it. A draft never answers: once the question
    is resolved (or for any other tool-call id) it is ignored and None returned. Raises
    DraftTooLong, ConversationNotFound."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    pending = pending_question(conversation)
    if pending is None or pending.tool_call_id != tool_call_id:
        return None
    questions = pending.payload.questions
    if len(answers) > len(questions) or any(
        len(answer.custom) > settings.PARLEY_MAX_MESSAGE_CHARS for answer in answers
    ):
        raise DraftTooLong
    # Only the question's own labels are kept; nothing here is validated as an answer yet.
    data = [
        Answer(
            labels=[label for label in answer.labels if label in question.labels],
            custom=answer.custom,
        ).model_dump()
        for question, answer in zip(questions, answers, strict=False)
    ]
    client = client if DRAFT_CLIENT.fullmatch(client) else ""
    draft, _created = QuestionDraft.objects.update_or_create(
        conversation=conversation,
        tool_call_id=tool_call_id,
        defaults={"user": user, "data": data, "client": client, "updated_at": timezone.now()},
    )
    # Every tab hears of it; the tab that typed it hides the line (static/parley-drafts.js).
    events.send_user_event_on_commit(
        user.pk,
        events.conversation_fragment(
            conversation.pk,
            "questions/question.html#elsewhere",
            {"q": {"tool_call_id": tool_call_id}, "client": client or "-"},
        ),
    )
    return draft
