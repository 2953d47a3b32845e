"""Reads. Every read of a conversation goes through `conversation_for_user`."""

from dataclasses import dataclass

from django.db.models import QuerySet

from chat.errors import ConversationNotFound
from chat.models import Conversation, Message


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    """The user's conversations, most recently active first (sub-agents' are shown only
    inside their parent's)."""
    return Conversation.objects.filter(owner=user, parent__isnull=True).order_by(
        "-updated_at", "-id"
    )


def conversation_for_user(*, user, conversation_id: int, lock: bool = False) -> Conversation:
    """The conversation if `user` may act on it; otherwise ConversationNotFound (never 403).
    A sub-agent's conversation is never found here: it is read only through its parent
    (`subagents_of`), and nobody posts to it, stops it or deletes it on its own.

    With lock=True the row is locked (SELECT ... FOR UPDATE); the caller must be in a
    transaction.
    """
    if user is None or not user.is_authenticated:
        raise ConversationNotFound
    queryset = Conversation.objects.filter(owner=user, parent__isnull=True)
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    try:
        return queryset.get(pk=conversation_id)
    except (Conversation.DoesNotExist, ValueError, TypeError):
        raise ConversationNotFound from None


def messages_changed_since(*, conversation_id: int, after: int) -> list[Message]:
    """Messages created or changed after the change cursor `after`, in transcript order."""
    return list(
        Message.objects.filter(conversation_id=conversation_id, seq__gt=after).order_by("order")
    )


@dataclass(frozen=True)
class TranscriptChanges:
    """What changed after a client's cursor, and the cursor that covers it."""

    conversation: Conversation  # read last: its state is at least as new as `cursor`
    messages: list[Message]
    cursor: int


def transcript_changes(
    *, user, conversation_id: int, after: int, first: Conversation | None = None
) -> TranscriptChanges:
    """Messages changed after `after`, with a cursor such that every change <= cursor is in them.

    Change numbers are handed out under the conversation's row lock, so they commit in order:
    everything up to the conversation's seq read first is committed before the messages are
    read. The conversation is read again at the end so the state shown is never older than the
    messages. `first`: the conversation as the caller just read it through
    conversation_for_user, to stand for that first read.
    """
    if first is None:
        first = conversation_for_user(user=user, conversation_id=conversation_id)
    messages = messages_changed_since(conversation_id=first.pk, after=after)
    cursor = max([after, first.seq, *(m.seq for m in messages)])
    latest = conversation_for_user(user=user, conversation_id=conversation_id)
    return TranscriptChanges(conversation=latest, messages=messages, cursor=cursor)
