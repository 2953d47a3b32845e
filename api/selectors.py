"""Reads of the API's own: pages of messages by a message-id cursor, the tool calls of
superseded messages (access is checked before, by chat.selectors.conversation_for_user), and
where the messages a call writes will start."""

from django.utils.translation import gettext_lazy as _

from api.results import tool_call_ids
from chat.models import Conversation, Role
from chat.paging import TranscriptPage, transcript_page
from chat.selectors import conversation_for_user
from core.errors import ParleyError


class BadCursor(ParleyError):
    status = 422
    default_message = _("Pass before or after, not both.")


def message_page(
    conversation: Conversation, *, limit: int, before: int | None = None, after: int | None = None
) -> TranscriptPage:
    """The newest `limit` messages, or the `limit` just older than the message `before` or
    just newer than the message `after` (message ids). BadCursor for both, or for an id that
    is not one of this conversation's messages. Two queries at most, whatever the length."""
    if before is not None and after is not None:
        raise BadCursor
    messages = conversation.messages.all()
    if before is None and after is None:
        return transcript_page(messages, limit=limit)
    name, message_id = ("before", before) if before is not None else ("after", after)
    order = messages.filter(pk=message_id).values_list("order", flat=True).first()
    if order is None:
        raise BadCursor(
            _("%(cursor)s must be the id of a message in this conversation.") % {"cursor": name}
        )
    return transcript_page(messages, limit=limit, **{name: order})


def superseded_tool_calls(conversation: Conversation) -> set[str]:
    """The ids of the tool calls in the conversation's superseded messages (what they started,
    such as sub-agents, is superseded with them). One query, of superseded messages only."""
    superseded = conversation.messages.filter(superseded=True, role=Role.ASSISTANT)
    return tool_call_ids(list(superseded.only("blocks")))


def next_order(*, user, conversation_id: int) -> int:
    """Where messages written from now on start (the transcript's length), for the user who
    may read the conversation."""
    return conversation_for_user(user=user, conversation_id=conversation_id).messages.count()
