"""Reads. Every read of a conversation goes through `conversation_for_user`."""

from dataclasses import dataclass

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet

from chat.errors import ConversationNotFound
from chat.models import AgentState, Conversation, Message

# PostgreSQL's "simple" text-search configuration: words as written, in any language (no
# stemming for one language that would miss the words of another).
SEARCH_CONFIG = "simple"


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    """The user's conversations, most recently active first (sub-agents' are shown only
    inside their parent's)."""
    return Conversation.objects.filter(owner=user, parent__isnull=True).order_by(
        "-updated_at", "-id"
    )


def search_conversations_for_user(*, user, query: str) -> QuerySet[Conversation]:
    """The user's conversations whose title or message text matches `query`, most recently
    active first: PostgreSQL's full-text search (web-search syntax: words, "a phrase", -not,
    or) on PostgreSQL, a case-insensitive substring match elsewhere."""
    conversations = conversations_for_user(user=user)
    query = " ".join(query.split())
    if not query:
        return conversations
    messages = Message.objects.filter(conversation=OuterRef("pk"), is_draft=False)
    if connection.vendor == "postgresql":
        words = SearchQuery(query, search_type="websearch", config=SEARCH_CONFIG)
        in_messages = messages.annotate(
            document=SearchVector("search_text", config=SEARCH_CONFIG)
        ).filter(document=words)
        # Titles are short: a part of a word finds them too.
        in_title = Q(title__icontains=query)
    else:
        in_messages = messages.filter(search_text__icontains=query)
        in_title = Q(title__icontains=query)
    return conversations.filter(in_title | Exists(in_messages))


def waiting_conversation_ids(*, user) -> set[int]:
    """The user's conversations paused until the user resolves something (a question)."""
    return set(
        conversations_for_user(user=user)
        .filter(agent_state=AgentState.AWAITING_USER)
        .values_list("pk", flat=True)
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


def transcript_changes(*, user, conversation_id: int, after: int) -> TranscriptChanges:
    """Messages changed after `after`, with a cursor such that every change <= cursor is in them.

    Change numbers are handed out under the conversation's row lock, so they commit in order:
    everything up to the conversation's seq read first is committed before the messages are
    read. The conversation is read again at the end so the state shown is never older than the
    messages.
    """
    first = conversation_for_user(user=user, conversation_id=conversation_id)
    messages = messages_changed_since(conversation_id=first.pk, after=after)
    cursor = max([after, first.seq, *(m.seq for m in messages)])
    latest = conversation_for_user(user=user, conversation_id=conversation_id)
    return TranscriptChanges(conversation=latest, messages=messages, cursor=cursor)
