"""Reads of questions. Access to a conversation is checked through chat.selectors first."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.urls import reverse

from chat.blocks import TextBlock
from chat.models import (
    AgentState,
    Conversation,
    MemberRole,
    Membership,
    Message,
    role_in_conversation,
)
from chat.selectors import (
    Need,
    accessible_conversation_id,
    acting_ids,
    check_role,
    conversation_for_user,
)
from questions.errors import QuestionAlreadyResolved
from questions.models import (
    TOOL_REQUEST_KINDS,
    Question,
    QuestionDraft,
    QuestionKind,
    QuestionStatus,
)
from questions.payloads import CANCEL, Answer


def question_for_user(
    *, user, conversation_id: int, tool_call_id: str, lock: bool = False
) -> Question:
    """The question of the call `tool_call_id` in one of the user's conversations, with its
    conversation, its message and whether it has a draft (`has_draft`), in one query; with
    `lock`, the conversation's row is locked (every resolution writes the transcript, and
    save_draft takes the same lock). Raises ConversationNotFound (no access),
    QuestionAlreadyResolved (no such question: a stale or unknown id, as the losers of a race
    see it)."""
    conversation_id = accessible_conversation_id(user=user, conversation_id=conversation_id)
    questions = (
        Question.objects.select_related("conversation", "message")
        .annotate(
            viewer_role=role_in_conversation(user, "conversation__"),
            shared=Exists(Membership.objects.filter(conversation=OuterRef("conversation_id"))),
            has_draft=Exists(QuestionDraft.objects.filter(question=OuterRef("pk"))),
        )
        .filter(
            conversation_id=conversation_id,
            conversation__parent__isnull=True,
            conversation__deleted_at__isnull=True,
            tool_call_id=tool_call_id,
        )
    )
    if lock:
        questions = questions.select_for_update(of=("conversation",))
    try:
        question = questions.get()
    except Question.DoesNotExist:
        conversation_for_user(user=user, conversation_id=conversation_id)  # which error
        raise QuestionAlreadyResolved from None
    # A stranger: 404; a viewer may read it, and only an owner or participant resolve it.
    check_role(question.viewer_role, Need.ACT if lock else Need.READ)
    question.conversation.viewer_role = question.viewer_role
    question.conversation.shared = question.shared
    return question


def pending_question(conversation: Conversation) -> Question | None:
    """The conversation's pending question, if it waits for one (the caller has checked
    access to it)."""
    if conversation.agent_state != AgentState.AWAITING_USER:
        return None
    question = (
        Question.objects.select_related("message")
        .filter(conversation=conversation, status=QuestionStatus.PENDING)
        .order_by("-created_at", "-id")
        .first()
    )
    if question is not None:
        question.conversation = conversation
    return question


def pending_questions(conversation: Conversation) -> list[Question]:
    """What the conversation waits for the person to answer now, in the order asked (the caller
    has checked access to it): while its turn is paused, every pending question or approval
    (the approvals of one step wait together, each decided on its own); while a tool runs, the
    elicitations it waits on, and its sub-agents' approvals. One query; none while the turn
    neither waits nor runs a tool."""
    state = conversation.agent_state
    if state not in (AgentState.AWAITING_USER, AgentState.TOOL_EXECUTING):
        return []
    rows = Question.objects.filter(conversation=conversation, status=QuestionStatus.PENDING)
    if state == AgentState.TOOL_EXECUTING:
        rows = rows.filter(Q(kind=QuestionKind.ELICITATION) | Q(subagent__isnull=False))
    found = list(rows.order_by("created_at", "id"))
    for question in found:
        question.conversation = conversation
    return found


def waiting_for(user) -> Q:
    """The questions that wait for `user`: those assigned to them, and the unassigned ones
    of the conversations they own or take part in (a viewer answers nothing)."""
    participating = Membership.objects.filter(user=user, role=MemberRole.PARTICIPANT).values(
        "conversation_id"
    )
    return Q(assigned_to=user) | Q(
        Q(conversation__owner=user) | Q(conversation_id__in=participating),
        assigned_to__isnull=True,
    )


def questions_for_user(*, user, status: str = QuestionStatus.PENDING) -> QuerySet[Question]:
    """The user's questions with this status in every conversation of theirs, the most
    recently changed first (pending ones: the most recently asked first). Pending ones are
    those that wait for the user (`waiting_for`: an assigned question waits for its assignee
    alone); resolved ones, those of the conversations they own or take part in."""
    questions = Question.objects.filter(
        status=status,
        conversation__parent__isnull=True,
        conversation__deleted_at__isnull=True,
    ).select_related("conversation", "answered_by", "assigned_to")
    if status == QuestionStatus.PENDING:
        questions = questions.filter(waiting_for(user))
    else:
        questions = questions.filter(
            conversation__in=Conversation.objects.visible_to(user).values("pk")
        )
    if status == QuestionStatus.PENDING:
        return questions.order_by("-created_at", "-id")
    return questions.order_by("-updated_at", "-id")


def pending_questions_for_user(*, user) -> list[Question]:
    """The user's pending questions, the most recently asked first."""
    return list(questions_for_user(user=user))


# A card's context line: at most this many characters of the agent's words.
CONTEXT_CHARS = 160


def inbox_questions_for_user(*, user) -> list[Question]:
    """The inbox's items: the pending questions, the most recently asked first, each with
    `context`, the agent's words just before it (the text of the message that asked it,
    shortened to one line of CONTEXT_CHARS), read in the same query."""
    questions = list(
        questions_for_user(user=user)
        .select_related("message")
        .defer("message__search_text", "message__search_vector")
    )
    for question in questions:
        question.context = context_line(question.message)
    return questions


def context_line(message: Message) -> str:
    text = " ".join(
        " ".join(block.text.split())
        for block in message.parsed_blocks
        if isinstance(block, TextBlock)
    ).strip()
    if len(text) > CONTEXT_CHARS:
        text = text[: CONTEXT_CHARS - 1].rstrip() + "…"
    return text


@dataclass(frozen=True)
class CardState:
    """What a pending question's card shows besides its block, read from its row when the card
    is rendered: whom it waits for alone (None: everyone who acts), and the draft saved for it
    (questions.resolving.save_draft), if any."""

    assigned_to_id: int | None
    draft: list[Answer]


def card_state(conversation_id: int, tool_call_id: str) -> CardState:
    """The card state of the question of the call `tool_call_id` (the caller has checked
    access to the conversation): its row and its draft, in one query."""
    row = (
        Question.objects.filter(conversation_id=conversation_id, tool_call_id=tool_call_id)
        .values_list("assigned_to_id", "draft__data")
        .first()
    )
    assigned_to_id, data = row or (None, None)
    draft = []
    for item in data if isinstance(data, list) else []:
        try:
            draft.append(Answer.model_validate(item))
        except ValueError:
            draft.append(Answer())
    return CardState(assigned_to_id=assigned_to_id, draft=draft)


def live_cards(conversation: Conversation) -> list[int]:
    """The messages whose pending question cards show state the transcript does not hold
    (whom each waits for, who may answer: chat.engine.tools.register_live_cards)."""
    pending = Question.objects.filter(conversation=conversation, status=QuestionStatus.PENDING)
    return sorted(
        set(pending.exclude(kind__in=TOOL_REQUEST_KINDS).values_list("message_id", flat=True))
    )


def recipient_ids(question: Question) -> tuple[int, ...]:
    """The users the question waits for: its assignee if it has one, else the conversation's
    owner and participants (owner first)."""
    if question.assigned_to_id is not None:
        return (question.assigned_to_id,)
    conversation = question.conversation
    if getattr(conversation, "shared", True) is False:  # read for a person: no query
        return (conversation.owner_id,)
    return tuple(acting_ids(question.conversation_id))


def assignees(conversation: Conversation) -> list:
    """Whom a question of the conversation may be assigned to: its owner and participants,
    owner first (the caller has checked access)."""
    participants = [
        m.user
        for m in conversation.memberships.filter(role=MemberRole.PARTICIPANT).select_related("user")
    ]
    return [conversation.owner, *participants]


def question_url(question: Question) -> str:
    """The question in its conversation, as an absolute link under PUBLIC_URL (for webhooks
    and the agents that asked it)."""
    link = reverse("chat:conversation_detail", args=[question.conversation_id])
    return f"{settings.PUBLIC_URL}{link}#question-{question.tool_call_id}"


# --- A running tool's requests (elicitations), for the call that waits on them -------------


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


def input_round(
    conversation_id: int, call_id: str
) -> tuple[int, str | None, dict[str, str]] | None:
    """The call's last input-required round (mcp_client.inputs): its number, the server's
    state, and its requests' rows (the server's key -> the row's key); None if it had none."""
    rows = list(
        Question.objects.filter(
            conversation_id=conversation_id,
            kind=QuestionKind.ELICITATION,
            questions__0__call_id=call_id,
            questions__0__round__gt=0,
        ).only("tool_call_id", "questions")
    )
    if not rows:
        return None
    number = max(row.elicitation.round for row in rows)
    last = [row for row in rows if row.elicitation.round == number]
    asked = {row.elicitation.input_key: row.tool_call_id for row in last}
    return number, last[0].elicitation.request_state, asked


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
