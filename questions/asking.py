"""Asking: a question the model asks, the approvals a step's tool calls wait for, and a running
tool's elicitation, each shown and stored as a Question row in one transaction.

The row is created pending, with its deadline (and reminder) fixed when it is asked if the
conversation's owner lets their questions expire; its block goes into the message of the call
that asked (chat.engine.turns), and the listeners (webhooks, mail, push) hear of it in the same
transaction. Resolving it is questions.resolving's, and an approval's decision
questions.approvals'.
"""

import hashlib
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.blocks import ToolCallBlock
from chat.engine import turns
from chat.errors import ConversationNotFound
from chat.models import Conversation
from questions import notifications
from questions.models import AnsweredVia, Question, QuestionKind, QuestionStatus
from questions.payloads import DENY, ApprovalRequest, ElicitationRequest, RuleNote
from questions.schemas import QuestionRequest


@transaction.atomic
def ask(lease: turns.Lease, call: ToolCallBlock, request: QuestionRequest, *, limit: int) -> bool:
    """Show the question under `call` and pause the turn (chat.engine.turns.pause), with its
    deadline fixed now if the owner's questions expire (their own setting, else
    QUESTION_EXPIRE_AFTER). False, and nothing changes, if the turn already asked `limit`
    questions."""
    question = new_question(
        lease.conversation_id,
        tool_call_id=call.id,
        kind=request.tool,
        questions=[q.model_dump(mode="json") for q in request.questions],
    )
    now = question.created_at
    paused = turns.pause(lease, call, question.block, limit=limit)
    if paused is None:
        return False
    question.conversation = paused.conversation
    question.message = paused.message
    question.save(force_insert=True)
    notifications.tell(notifications.asked_event(question), question, at=now)
    return True


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
                "questions": [request.model_dump(mode="json", exclude_none=True)],
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
        notifications.tell(notifications.APPROVAL_REQUESTED, row, at=now)
    return True


def subagent_key(child_id: int, call_id: str) -> str:
    """The row key of a sub-agent's call's approval in the parent: unique there, and the same
    each time the call runs (a runner that takes the sub-agent's turn over finds the row)."""
    return "subagent_" + hashlib.sha256(f"{child_id}:{call_id}".encode()).hexdigest()[:40]


@transaction.atomic
def ask_for_subagent(lease: turns.Lease, call: ToolCallBlock, request: ApprovalRequest) -> Question:
    """Show a running sub-agent's approval in its parent (chat.engine.turns.show_in_parent),
    labelled with the sub-agent's number and title, with the owner's question deadline; the
    sub-agent's call waits for it as it runs, and its siblings run on. The row made for the
    same call before, if there is one (the call runs again after its runner stopped)."""
    key = subagent_key(lease.conversation_id, call.id)
    child = Conversation.objects.only("parent_id", "title", "subagent_index").get(
        pk=lease.conversation_id
    )
    asked = Question.objects.filter(conversation_id=child.parent_id, tool_call_id=key).first()
    if asked is not None:
        return asked
    request = request.model_copy(
        update={"subagent_number": child.subagent_index + 1, "subagent": child.title}
    )
    question = new_question(
        child.parent_id,
        tool_call_id=key,
        kind=QuestionKind.TOOL_APPROVAL,
        subagent_id=child.pk,
        questions=[request.model_dump(mode="json", exclude_none=True)],
    )
    now = question.created_at
    question.conversation, question.message = turns.show_in_parent(lease, question.block)
    question.save(force_insert=True)
    notifications.tell(notifications.APPROVAL_REQUESTED, question, at=now)
    return question


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
    notifications.tell(notifications.ASKED, question, at=now)
    return question


@transaction.atomic
def record_rule_decision(
    lease: turns.Lease,
    call: ToolCallBlock,
    request: ApprovalRequest,
    *,
    decision: str,
    rule: RuleNote,
) -> Question:
    """A rule decided the running `call` (allow or deny) without asking: its approval row,
    resolved by the rule and naming it (the audit), shown under the call's message; the
    listeners hear `approval.resolved` (webhooks), as for a person's decision."""
    question = new_question(
        lease.conversation_id,
        tool_call_id=call.id,
        kind=QuestionKind.TOOL_APPROVAL,
        questions=[request.model_dump(mode="json", exclude_none=True)],
    )
    question.expires_at = question.remind_at = None
    question.status = QuestionStatus.REJECTED if decision == DENY else QuestionStatus.ANSWERED
    question.answered_at = question.created_at
    question.answered_via = AnsweredVia.RULE
    question.answers = {"decision": decision, "rule": rule.model_dump(mode="json")}
    question.message = turns.show_action(lease, call, question.block, waiting=False)
    question.conversation = question.message.conversation
    question.save(force_insert=True)
    notifications.tell(notifications.APPROVAL_RESOLVED, question, at=question.created_at)
    return question


def new_question(conversation_id: int, **fields) -> Question:
    """A Question row for the conversation, not saved (see `new_questions`)."""
    return new_questions(conversation_id, [fields])[0]


def new_questions(conversation_id: int, rows: list[dict]) -> list[Question]:
    """Question rows for the conversation, one per dict of fields, not saved, asked now, with
    their deadline (and reminder) fixed now if the owner's questions expire (their own
    setting, else QUESTION_EXPIRE_AFTER). Raises ConversationNotFound."""
    owner_id, own_setting = Conversation.objects.filter(pk=conversation_id).values_list(
        "owner_id", "owner__preferences__question_expire_after"
    ).first() or (None, None)
    if owner_id is None:
        raise ConversationNotFound
    now = timezone.now()
    seconds = expire_after(own_setting)
    expires_at = now + timedelta(seconds=seconds) if seconds else None
    return [
        Question(
            conversation_id=conversation_id,
            expires_at=expires_at,
            remind_at=remind_at(expires_at, seconds) if expires_at else None,
            created_at=now,
            updated_at=now,
            **fields,
        )
        for fields in rows
    ]


def expire_after(own_setting: int | None) -> int | None:
    """Seconds a question stays open: the owner's own setting, else the server's
    QUESTION_EXPIRE_AFTER; None (or 0 in either) means never."""
    seconds = own_setting if own_setting is not None else settings.QUESTION_EXPIRE_AFTER
    return seconds or None


def remind_at(expires_at: datetime, seconds: int) -> datetime | None:
    """When to remind: QUESTION_REMIND_BEFORE seconds before the deadline (by default a fifth
    of the time before it, that is at 80%); None for no reminder (0, or not before the ask)."""
    before = settings.QUESTION_REMIND_BEFORE
    before = seconds / 5 if before is None else before
    if not before or before >= seconds:
        return None
    return expires_at - timedelta(seconds=before)
