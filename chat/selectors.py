"""Reads. Every read of a conversation goes through `conversation_for_user`."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet

from chat.blocks import TextBlock, ToolResultBlock, parse_blocks
from chat.compiled import CompiledQuery
from chat.errors import ConversationNotFound
from chat.models import AgentState, Conversation, Message, Role

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


# The largest id or change cursor a column of ours holds (a signed 64-bit integer).
MAX_ID = 2**63 - 1


def _conversation_query(*, lock: bool, flag_children: bool) -> CompiledQuery:
    def build(owner_id, pk):
        queryset = Conversation.objects.filter(owner_id=owner_id, parent__isnull=True, pk=pk)
        if flag_children:
            queryset = queryset.annotate(
                has_children=Exists(Conversation.objects.filter(parent=OuterRef("pk")))
            )
        if lock:
            queryset = queryset.select_for_update(of=("self",))
        return queryset.order_by()

    return CompiledQuery(build)


# Every websocket push, page request and answer starts with one of these (chat.compiled).
_CONVERSATION_QUERIES = {
    (lock, flag_children): _conversation_query(lock=lock, flag_children=flag_children)
    for lock in (False, True)
    for flag_children in (False, True)
}


def conversation_for_user(
    *, user, conversation_id: int, lock: bool = False, flag_children: bool = False
) -> Conversation:
    """The conversation if `user` may act on it; otherwise ConversationNotFound (never 403).
    A sub-agent's conversation is never found here: it is read only through its parent
    (`subagents_of`), and nobody posts to it, stops it or deletes it on its own.

    With lock=True the row is locked (SELECT ... FOR UPDATE); the caller must be in a
    transaction. With flag_children=True, `has_children` says whether it has sub-agents, in
    the same query.
    """
    if user is None or not user.is_authenticated:
        raise ConversationNotFound
    try:
        conversation_id = int(conversation_id)
    except (ValueError, TypeError):
        raise ConversationNotFound from None
    if not 0 < conversation_id <= MAX_ID:  # no such id (the database refuses larger ones)
        raise ConversationNotFound
    query = _CONVERSATION_QUERIES[lock, flag_children]
    conversation = query.first(owner_id=user.pk, pk=conversation_id)
    if conversation is None:
        raise ConversationNotFound
    return conversation


_MESSAGES_CHANGED_SINCE = CompiledQuery(
    lambda conversation_id, after: Message.objects.filter(
        conversation_id=conversation_id, seq__gt=after
    ).order_by("order")
)


def messages_changed_since(*, conversation_id: int, after: int) -> list[Message]:
    """Messages created or changed after the change cursor `after`, in transcript order."""
    # A cursor past any the database can hold (a client's) has nothing after it.
    return _MESSAGES_CHANGED_SINCE.all(conversation_id=conversation_id, after=min(after, MAX_ID))


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
    ToolResults.share(messages)
    cursor = max([after, first.seq, *(m.seq for m in messages)])
    if cursor == first.seq:
        # Nothing committed after the first read is among the messages: it is as new as they.
        return TranscriptChanges(conversation=first, messages=messages, cursor=cursor)
    latest = conversation_for_user(user=user, conversation_id=conversation_id)
    return TranscriptChanges(conversation=latest, messages=messages, cursor=cursor)


@dataclass(frozen=True)
class LastTurn:
    """The conversation's last turn: the user message that started it, and what followed."""

    prompt: Message
    after: list[Message]

    @property
    def prompt_text(self) -> str:
        return "\n\n".join(b.text for b in self.prompt.parsed_blocks if isinstance(b, TextBlock))


# Transcripts are read backwards (pages_newest_first) this many messages at a time.
NEWEST_FIRST_BATCH = 50


def pages_newest_first(page: Callable[[int | None], list[Message]]) -> Iterator[Message]:
    """Messages newest first, `page(below)` reading the NEWEST_FIRST_BATCH newest whose order
    is below `below` (None: of all), through a CompiledQuery: for a search that usually ends
    near the end of the transcript, which then costs what the end does, not the whole."""
    below: int | None = None
    while True:
        found = page(below)
        yield from found
        if len(found) < NEWEST_FIRST_BATCH:
            return
        below = found[-1].order


# The highest `order` a message can have (a PositiveIntegerField's range).
ORDER_MAX = 2_147_483_647

# The agent's messages (superseded ones too), newest first, a page at a time.
_ASSISTANT_BELOW = CompiledQuery(
    lambda conversation_id, below: Message.objects.filter(
        conversation_id=conversation_id, role=Role.ASSISTANT, order__lt=below
    ).order_by("-order")[:NEWEST_FIRST_BATCH]
)


def assistant_newest_first(conversation_id: int) -> Iterator[Message]:
    """The agent's messages, superseded ones too, newest first (pages_newest_first): what
    looks for a question or a tool call's message usually finds it in the first page."""
    return pages_newest_first(
        lambda below: _ASSISTANT_BELOW.all(
            conversation_id=conversation_id, below=ORDER_MAX if below is None else below
        )
    )


# The messages shown (superseded ones left out), newest first, a page at a time.
_SHOWN_BELOW = CompiledQuery(
    lambda conversation_id, below: Message.objects.filter(
        conversation_id=conversation_id, superseded=False, order__lt=below
    ).order_by("-order")[:NEWEST_FIRST_BATCH]
)


def last_turn_newest_first(conversation_id: int) -> Iterator[tuple[Message, bool]]:
    """The last turn's messages in the transcript shown, newest first, each with whether it is
    the user message that started the turn (the last one given, if there is one). A user
    message that answered a question is part of its turn, not the start of one.

    Read from the end (pages_newest_first): the result naming a reply is stored after the
    reply, so every reply is known as such by the time it is reached; and a turn's reads cost
    what the turn is, not the transcript."""
    replies: set[int] = set()
    for message in pages_newest_first(
        lambda below: _SHOWN_BELOW.all(
            conversation_id=conversation_id, below=ORDER_MAX if below is None else below
        )
    ):
        if message.role == Role.USER and message.pk not in replies:
            yield message, True
            return
        if message.role == Role.TOOL:
            replies.update(
                block.reply_message_id
                for block in parse_blocks(message.blocks)
                if isinstance(block, ToolResultBlock) and block.reply_message_id is not None
            )
        yield message, False


def last_turn(*, conversation_id: int) -> LastTurn | None:
    """The last turn in the transcript shown (superseded messages left out), or None before
    the first message (last_turn_newest_first)."""
    after: list[Message] = []  # newest first
    for message, starts in last_turn_newest_first(conversation_id):
        if starts:
            return LastTurn(prompt=message, after=after[::-1])
        after.append(message)
    return None


def tool_result(*, message: Message, call_id: str) -> ToolResultBlock | None:
    """The result of the tool call `call_id` made in `message`, once there is one: the first
    with that id in a later tool message shown. Messages read by transcript_changes share
    one reading of the results for all their cards (ToolResults)."""
    results = getattr(message, ToolResults.ATTRIBUTE, None)
    if results is None:
        results = ToolResults(message.conversation_id, after=message.order)
    return results.of(message, call_id)


class ToolResults:
    """The tool results of a conversation shown after one place in its transcript, read
    when the first card asks, in one query: a page of many tool calls costs one reading of
    their results instead of one per card."""

    ATTRIBUTE = "parley_tool_results"

    def __init__(self, conversation_id: int, *, after: int) -> None:
        self.conversation_id = conversation_id
        self.after = after

    @classmethod
    def share(cls, messages: list[Message]) -> None:
        """Let `messages` (of one conversation) find their calls' results together."""
        if messages:
            results = cls(messages[0].conversation_id, after=min(m.order for m in messages))
            for message in messages:
                setattr(message, cls.ATTRIBUTE, results)

    def of(self, message: Message, call_id: str) -> ToolResultBlock | None:
        for order, block in self.by_call.get(call_id, ()):
            if order > message.order:
                return block
        return None

    @cached_property
    def by_call(self) -> dict[str, list[tuple[int, ToolResultBlock]]]:
        """Each call id's results, in transcript order, with their message's place."""
        by_call: dict[str, list[tuple[int, ToolResultBlock]]] = {}
        later = Message.objects.filter(
            conversation_id=self.conversation_id,
            role=Role.TOOL,
            order__gt=self.after,
            superseded=False,
        ).order_by("order")
        for result_message in later.only("order", "blocks"):
            for block in parse_blocks(result_message.blocks):
                if isinstance(block, ToolResultBlock):
                    by_call.setdefault(block.tool_call_id, []).append((result_message.order, block))
        return by_call
