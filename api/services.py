"""The API's own writes: what its endpoints decide before calling the services every channel
shares (questions.resolving, chat.sharing)."""

from django.db import transaction
from django.utils.translation import gettext as _

from chat import sharing
from chat.models import Conversation, Message
from chat.selectors import Need, conversation_for_user, members_of
from core.errors import ParleyError
from questions import resolving
from questions.models import QuestionKind
from questions.payloads import Via
from questions.selectors import pending_questions


class NotAQuestion(ParleyError):
    """What waits is an approval or an elicitation, which /respond cannot answer."""

    status = 409


@transaction.atomic
def answer_by_text(
    *,
    user,
    conversation_id: int,
    answers: dict[str, str | list[str]],
    tool_call_id: str | None,
    via: Via,
) -> Message:
    """questions.resolving.answer_question_by_text, once the pending thing is known to be a
    question: NotAQuestion (naming the endpoint that answers it) when everything that waits
    is an approval or an elicitation. The conversation stays locked from the check to the
    answer."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    waiting = pending_questions(conversation)
    if waiting and all(q.is_tool_request for q in waiting):
        first = waiting[0]
        if first.kind == QuestionKind.TOOL_APPROVAL:
            message = _(
                "A tool call waits for approval, not an answer: decide it with POST "
                "/api/v1/conversations/%(id)s/approvals/%(call)s."
            )
        else:
            message = _(
                "A tool asks for values, not an answer: reply with POST "
                "/api/v1/conversations/%(id)s/elicitations/%(call)s."
            )
        raise NotAQuestion(message % {"id": conversation_id, "call": first.tool_call_id})
    return resolving.answer_question_by_text(
        user=user,
        conversation_id=conversation_id,
        answers=answers,
        tool_call_id=tool_call_id,
        via=via,
    )


def remove_member_named(*, user, conversation_id: int, username: str) -> Conversation:
    """chat.sharing.remove_member for the member called `username`; SharingRefused when no
    member is. Only the owner may (NotAllowed for anyone else). Returns the conversation."""
    conversation = conversation_for_user(
        user=user, conversation_id=conversation_id, need=Need.MANAGE
    )
    member = next((m for m in members_of(conversation) if m.user.get_username() == username), None)
    if member is None:
        raise sharing.SharingRefused(sharing.NO_SUCH_MEMBER)
    sharing.remove_member(user=user, conversation_id=conversation_id, member_id=member.user_id)
    return conversation
