"""One Question row for every question_request block stored before questions had rows, with
its deadline (from the Deadline table) and its resolution and audit (from the block); drafts
move to their question. A question left pending in a conversation that no longer waits for it
is cancelled, and its block says so (the block and the row never disagree). Backwards,
deadlines and drafts are written back from the rows, and cancelled blocks are pending again.

Blocks are read here as stored JSON, without the app's code, which may change after this
migration: the fields are the contract's camelCase names (questions.payloads)."""

from datetime import datetime

from django.conf import settings
from django.db import migrations
from django.utils.dateparse import parse_datetime

STATUS_OF_RESOLUTION = {
    "replied": "answered",
    "rejected": "rejected",
    "expired": "expired",
    "cancelled": "cancelled",
}
VIAS = {"browser", "api", "terminal", "auto-resolve", "expiry"}
KINDS = {"question", "ask_user_question", "confirm_action"}
# The contract's original single-question fields, for blocks stored with no `questions` list.
MIRRORED = {
    "questionHeader": "header",
    "questionText": "question",
    "questionDetails": "details",
    "questionOptions": "options",
    "questionMultiple": "multiSelect",
    "questionCustom": "custom",
    "questionDefault": "default",
}


def _time(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None


def _questions(extra: dict) -> list | None:
    questions = extra.get("questions")
    if questions is None and "questionText" in extra:
        questions = [{name: extra[key] for key, name in MIRRORED.items() if key in extra}]
    if not isinstance(questions, list) or not questions:
        return None
    return questions


def _status(extra: dict, waiting: bool) -> str:
    resolution = extra.get("questionResolution", "asked")
    if resolution == "replied" and (
        extra.get("answeredVia") == "auto-resolve" or extra.get("answers") is None
    ):
        return "auto_resolved"
    if resolution in STATUS_OF_RESOLUTION:
        return STATUS_OF_RESOLUTION[resolution]
    # Asked: pending while its conversation still waits for it; a question left pending in
    # a conversation that moved on can no longer be answered.
    return "pending" if waiting else "cancelled"


def _show_as(block: dict, resolution: str) -> None:
    """Make a stored question block show `resolution`: "cancelled" (it can no longer be
    answered), or "asked" again (backwards)."""
    asked = resolution == "asked"
    block["status"] = "pending" if asked else "denied"
    block["extra"]["questionResolution"] = resolution
    block["extra"]["needsUserAction"] = asked


def create_rows(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    Question = apps.get_model("questions", "Question")
    Deadline = apps.get_model("questions", "Deadline")
    QuestionDraft = apps.get_model("questions", "QuestionDraft")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    deadlines = {(d.conversation_id, d.tool_call_id): d for d in Deadline.objects.all()}
    users: dict[str, int | None] = {}
    seen: set[tuple[int, str]] = set()
    rows = []
    messages = (
        Message.objects.filter(role="assistant", blocks__icontains="question_request")
        .select_related("conversation")
        .order_by("conversation_id", "-order")  # newest first: the newest pending one waits
        .iterator(chunk_size=500)
    )
    waiting_found: set[int] = set()
    cancelled: list = []  # messages whose blocks now show a question cancelled
    for message in messages:
        for block in message.blocks if isinstance(message.blocks, list) else []:
            if not isinstance(block, dict) or block.get("action_type") != "question_request":
                continue
            extra = block.get("extra")
            if not isinstance(extra, dict):
                continue
            call_id = extra.get("toolCallId")
            questions = _questions(extra)
            key = (message.conversation_id, call_id)
            if not isinstance(call_id, str) or not call_id or questions is None or key in seen:
                continue
            seen.add(key)
            conversation = message.conversation
            waiting = (
                conversation.agent_state == "awaiting_user"
                and conversation.pk not in waiting_found
            )
            status = _status(extra, waiting)
            if status == "pending":
                waiting_found.add(conversation.pk)
            elif status == "cancelled":
                _show_as(block, "cancelled")
                if not cancelled or cancelled[-1] is not message:
                    cancelled.append(message)
            deadline = deadlines.get(key)
            name = extra.get("answeredBy")
            if isinstance(name, str) and name not in users:
                users[name] = User.objects.filter(username=name).values_list("pk", flat=True).first()
            reply = extra.get("answerMessageId")
            answers = extra.get("answers")
            via = extra.get("answeredVia")
            answered_at = _time(extra.get("answeredAt"))
            kind = extra.get("toolName")
            rows.append(
                Question(
                    conversation_id=message.conversation_id,
                    message_id=message.pk,
                    tool_call_id=call_id[:64],
                    kind=kind if kind in KINDS else "question",
                    questions=questions,
                    status=status,
                    answers=answers if isinstance(answers, list) else None,
                    answer_text=extra.get("answerText") or "",
                    reply_id=int(reply) if str(reply).isdigit() else None,
                    answered_by_id=users.get(name) if isinstance(name, str) else None,
                    answered_at=answered_at,
                    answered_via=via if via in VIAS else "",
                    expires_at=deadline.expires_at if deadline else _time(extra.get("expiresAt")),
                    remind_at=deadline.remind_at if deadline else None,
                    reminded_at=deadline.reminded_at if deadline else None,
                    created_at=message.updated_at if status == "pending" else message.created_at,
                    updated_at=answered_at or message.updated_at,
                )
            )
    # A reply message may be gone (a deleted row): the link is dropped, not the question.
    replies = {q.reply_id for q in rows if q.reply_id is not None}
    existing = set(Message.objects.filter(pk__in=replies).values_list("pk", flat=True))
    for question in rows:
        if question.reply_id not in existing:
            question.reply_id = None
    Question.objects.bulk_create(rows, batch_size=500)
    for message in cancelled:
        Message.objects.filter(pk=message.pk).update(blocks=message.blocks)
    by_call = {
        (q.conversation_id, q.tool_call_id): q.pk
        for q in Question.objects.only("pk", "conversation_id", "tool_call_id")
    }
    for draft in QuestionDraft.objects.all():
        question_id = by_call.get((draft.conversation_id, draft.tool_call_id))
        if question_id is None:
            draft.delete()  # a draft of a question that no longer exists
        else:
            draft.question_id = question_id
            draft.save(update_fields=["question"])


def restore_deadlines(apps, schema_editor):
    """Backwards: the deadlines and the drafts' keys, from the rows; a cancelled question's
    block shows it asked again, as earlier versions stored it (they know no "cancelled")."""
    Message = apps.get_model("chat", "Message")
    Question = apps.get_model("questions", "Question")
    Deadline = apps.get_model("questions", "Deadline")
    QuestionDraft = apps.get_model("questions", "QuestionDraft")
    Deadline.objects.bulk_create(
        [
            Deadline(
                conversation_id=q.conversation_id,
                tool_call_id=q.tool_call_id,
                expires_at=q.expires_at,
                remind_at=q.remind_at,
                reminded_at=q.reminded_at,
                resolved_at=None if q.status == "pending" else (q.answered_at or q.updated_at),
                expired=q.status == "expired",
            )
            for q in Question.objects.filter(expires_at__isnull=False)
        ],
        batch_size=500,
    )
    for draft in QuestionDraft.objects.select_related("question"):
        draft.conversation_id = draft.question.conversation_id
        draft.tool_call_id = draft.question.tool_call_id
        draft.save(update_fields=["conversation", "tool_call_id"])
    calls: dict[int, set[str]] = {}
    cancelled = Question.objects.filter(status="cancelled")
    for message_id, call_id in cancelled.values_list("message_id", "tool_call_id"):
        calls.setdefault(message_id, set()).add(call_id)
    for message in Message.objects.filter(pk__in=calls):
        for block in message.blocks if isinstance(message.blocks, list) else []:
            extra = block.get("extra") if isinstance(block, dict) else None
            if (
                block.get("action_type") == "question_request"
                and isinstance(extra, dict)
                and extra.get("toolCallId") in calls[message.pk]
                and extra.get("questionResolution") == "cancelled"
            ):
                _show_as(block, "asked")
        Message.objects.filter(pk=message.pk).update(blocks=message.blocks)


class Migration(migrations.Migration):
    dependencies = [
        ("questions", "0004_question"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(create_rows, restore_deadlines)]
