"""Reads of questions. Access to a conversation is checked through chat.selectors first."""

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from chat.models import AgentState, Conversation
from chat.selectors import accessible_conversation_id, conversation_for_user
from questions.blocks import Answer
from questions.errors import QuestionAlreadyResolved
from questions.models import Question, QuestionDraft, QuestionStatus


def question_for_user(
    *, user, conversation_id: int, tool_call_id: str, lock: bool = False
) -> Question:
    """The question of the call `tool_call_id` in one of the user's conversations, with its
    conversation and message, in one query; with `lock`, the conversation's row is locked
    (every resolution writes the transcript). Raises ConversationNotFound (no access),
    QuestionAlreadyResolved (no such question: a stale or unknown id, as the losers of a race
    see it)."""
    conversation_id = accessible_conversation_id(user=user, conversation_id=conversation_id)
    questions = Question.objects.select_related("conversation", "message").filter(
        conversation_id=conversation_id,
        conversation__owner=user,
        conversation__parent__isnull=True,
        tool_call_id=tool_call_id,
    )
    if lock:
        questions = questions.select_for_update(of=("conversation",))
    try:
        return questions.get()
    except Question.DoesNotExist:
        conversation_for_user(user=user, conversation_id=conversation_id)  # which error
        raise QuestionAlreadyResolved from None


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


def questions_for_user(*, user, status: str = QuestionStatus.PENDING) -> QuerySet[Question]:
    """The user's questions with this status in every conversation of theirs, the most
    recently changed first (pending ones: the most recently asked first)."""
    questions = Question.objects.filter(
        status=status, conversation__owner=user, conversation__parent__isnull=True
    ).select_related("conversation", "answered_by")
    if status == QuestionStatus.PENDING:
        return questions.order_by("-created_at", "-id")
    return questions.order_by("-updated_at", "-id")


def pending_questions_for_user(*, user) -> list[Question]:
    """The user's pending questions, the most recently asked first."""
    return list(questions_for_user(user=user))


def draft_answers(conversation_id: int, tool_call_id: str) -> list[Answer]:
    """The saved, unsent answer to a question (questions.services.save_draft), if any; the
    caller has checked access to the conversation."""
    try:
        draft = QuestionDraft.objects.only("data").get(
            question__conversation_id=conversation_id, question__tool_call_id=tool_call_id
        )
    except QuestionDraft.DoesNotExist:
        return []
    if not isinstance(draft.data, list):
        return []
    answers = []
    for item in draft.data:
        try:
            answers.append(Answer.model_validate(item))
        except ValueError:
            answers.append(Answer())
    return answers


def question_url(question: Question) -> str:
    """The question in its conversation, as an absolute link under PUBLIC_URL (for webhooks
    and the agents that asked it)."""
    link = reverse("chat:conversation_detail", args=[question.conversation_id])
    return f"{settings.PUBLIC_URL}{link}#question-{question.tool_call_id}"
