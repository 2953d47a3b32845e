"""Reads. Every read of a conversation for a person goes through `conversation_for_user`."""

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cached_property

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import OperationalError, connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from chat.blocks import ErrorBlock, TextBlock, ToolResultBlock, parse_blocks
from chat.errors import OWNER_ONLY, VIEWER_REFUSED, ConversationNotFound, NotAllowed, SearchTooSlow
from chat.models import (
    ACTING_ROLES,
    OWNER,
    SEARCH_CONFIG,
    AgentState,
    Conversation,
    MemberRole,
    Membership,
    Message,
    Role,
)
from chat.paging import transcript_page

# The largest id or change cursor a column of ours holds (a signed 64-bit integer).
MAX_ID = 2**63 - 1
# PostgreSQL's SQLSTATE for a statement cancelled (by statement_timeout, say).
QUERY_CANCELED = "57014"


class Need(enum.Enum):
    """What a person wants to do with a conversation, and so the role it takes."""

    READ = "read"  # any member: the owner, a participant or a viewer
    ACT = "act"  # chat, answer, decide, stop, edit: the owner or a participant
    MANAGE = "manage"  # rename, pin, delete, share: the owner alone


def check_role(role: str | None, need: Need) -> None:
    """Raise ConversationNotFound for a stranger (`role` None: never 403, which would tell
    that the conversation exists) and NotAllowed when the role is not enough for `need`."""
    if role is None:
        raise ConversationNotFound
    if need is Need.ACT and role not in ACTING_ROLES:
        raise NotAllowed(VIEWER_REFUSED)
    if need is Need.MANAGE and role != OWNER:
        raise NotAllowed(OWNER_ONLY)


def conversations_for_user(*, user) -> QuerySet[Conversation]:
    """The conversations the user may read (their own and those shared with them), most
    recently active first (sub-agents' are shown only inside their parent's; deleted ones,
    still undoable, nowhere), each with the user's `viewer_role`."""
    return (
        Conversation.objects.visible_to(user)
        .with_role_of(user)
        .filter(parent__isnull=True, deleted_at__isnull=True)
        .order_by("-updated_at", "-id")
    )


def sidebar_conversations(*, user, limit: int) -> list[Conversation]:
    """The sidebar's conversations: the pinned ones first, then the most recently active."""
    return list(
        conversations_for_user(user=user)
        .select_related("owner")
        .order_by("-pinned", "-updated_at", "-id")[:limit]
    )


def newest_conversation(*, user) -> Conversation | None:
    """The conversation the person was in last, if any."""
    return conversations_for_user(user=user).only("pk").first()


@dataclass(frozen=True)
class SidebarGroup:
    label: str
    conversations: list[Conversation]


def sidebar_groups(conversations: list[Conversation], *, today: date) -> list[SidebarGroup]:
    """`conversations` (pinned first, then newest first) under the sidebar's headings: Pinned,
    then by the local day of their last activity."""
    groups: dict[str, list[Conversation]] = {}
    for conversation in conversations:
        if conversation.pinned:
            label = _("Pinned")
        else:
            day = timezone.localdate(conversation.updated_at)
            if day >= today:
                label = _("Today")
            elif day == today - timedelta(days=1):
                label = _("Yesterday")
            elif day > today - timedelta(days=8):
                label = _("Previous 7 days")
            else:
                label = _("Older")
        groups.setdefault(str(label), []).append(conversation)
    return [SidebarGroup(label, items) for label, items in groups.items()]


# A search result's snippet: this many characters of the matching message around the match.
SNIPPET_CHARS = 90


def search_words(query: str) -> list[str]:
    """The words a search looks for (web-search syntax: not its quotes, `or`, or -excluded
    words): what a snippet is cut around and what the page marks."""
    return [
        word
        for word in query.replace('"', " ").split()
        if not word.startswith("-") and word.lower() != "or"
    ]


def search_snippets(*, conversation_ids: list[int], query: str) -> dict[int, str]:
    """For each of these conversations (the caller's, found by `query`), a short piece of its
    newest message that matches, around the first of the query's words it holds. One query."""
    words = search_words(query)
    if not conversation_ids or not words:
        return {}
    messages = Message.objects.filter(conversation_id__in=conversation_ids, is_draft=False)
    if connection.vendor == "postgresql":
        found = SearchQuery(query, search_type="websearch", config=SEARCH_CONFIG)
        messages = messages.filter(search_vector=found)
    else:
        messages = messages.filter(search_text__icontains=query)
    snippets: dict[int, str] = {}
    rows = messages.order_by("-order").values_list("conversation_id", "search_text")
    for conversation_id, text in rows.iterator():
        if conversation_id not in snippets:
            snippets[conversation_id] = snippet(text, words)
    return snippets


def snippet(text: str, words: list[str]) -> str:
    """About SNIPPET_CHARS of `text` around the first of `words` it holds, on one line."""
    lowered = text.lower()
    at = min((i for w in words if (i := lowered.find(w.lower())) >= 0), default=0)
    start = max(0, at - SNIPPET_CHARS // 3)
    piece = " ".join(text[start : start + SNIPPET_CHARS].split())
    return ("…" if start > 0 else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def search_conversations_for_user(*, user, query: str, limit: int | None = None) -> list:
    """Up to `limit` of the user's conversations whose title or message text matches `query`
    (clean, not empty), most recently active first: PostgreSQL's full-text search (web-search
    syntax: words, "a phrase", -not, or) through the messages' GIN index on PostgreSQL, a
    case-insensitive substring match elsewhere. Titles are short: a part of a word finds them
    too. Raises SearchTooSlow past PARLEY_SEARCH_TIMEOUT (PostgreSQL)."""
    messages = Message.objects.filter(is_draft=False)
    if connection.vendor == "postgresql":
        words = SearchQuery(query, search_type="websearch", config=SEARCH_CONFIG)
        messages = messages.filter(search_vector=words)
    else:
        messages = messages.filter(search_text__icontains=query)
    found = conversations_for_user(user=user).filter(
        Q(title__icontains=query) | Q(pk__in=messages.values("conversation_id"))
    )[:limit]
    try:
        with statement_timeout(settings.PARLEY_SEARCH_TIMEOUT):
            return list(found)
    except OperationalError as error:
        if statement_timed_out(error):
            raise SearchTooSlow from None
        raise


@contextmanager
def statement_timeout(seconds: float) -> Iterator[None]:
    """On PostgreSQL, statements inside are cancelled after `seconds` (0: never)."""
    if connection.vendor != "postgresql" or seconds <= 0:
        yield
        return
    with transaction.atomic(), connection.cursor() as cursor:
        # set_config(..., true) is SET LOCAL: it ends with this transaction.
        cursor.execute(
            "SELECT set_config('statement_timeout', %s, true)", [f"{round(seconds * 1000)}ms"]
        )
        yield


def statement_timed_out(error: OperationalError) -> bool:
    """Whether PostgreSQL cancelled the statement at its statement_timeout."""
    return getattr(error.__cause__, "sqlstate", None) == QUERY_CANCELED


def waiting_conversation_ids(*, user) -> set[int]:
    """The conversations paused until the user (their owner or a participant) resolves
    something (a question); the live channel then narrows it to what waits for this user."""
    acting = Q(owner=user) | Q(
        pk__in=Membership.objects.filter(user=user, role=MemberRole.PARTICIPANT).values(
            "conversation_id"
        )
    )
    return set(
        Conversation.objects.filter(
            acting,
            parent__isnull=True,
            deleted_at__isnull=True,
            agent_state=AgentState.AWAITING_USER,
        ).values_list("pk", flat=True)
    )


def accessible_conversation_id(*, user, conversation_id) -> int:
    """`conversation_id` as an id `user` may look for, or ConversationNotFound: nobody is
    signed in, or it is no id at all (the database refuses ids out of range)."""
    if user is None or not user.is_authenticated:
        raise ConversationNotFound
    try:
        conversation_id = int(conversation_id)
    except (ValueError, TypeError):
        raise ConversationNotFound from None
    if not 0 < conversation_id <= MAX_ID:
        raise ConversationNotFound
    return conversation_id


def conversation_for_user(
    *, user, conversation_id, lock: bool = False, need: Need | None = None
) -> Conversation:
    """The conversation if `user` may do what `need` asks in it (default: READ, and ACT
    with `lock`, since every write locks); ConversationNotFound for a stranger (never 403),
    NotAllowed for a member whose role is not enough (chat.selectors.check_role). The
    conversation carries the user's `viewer_role` and whether it is `shared`. A sub-agent's
    conversation is never found here: it is read only through its parent (`subagents_of`),
    and nobody posts to it, stops it or deletes it on its own.

    With lock=True the row is locked (SELECT ... FOR UPDATE) for the caller's transaction.
    """
    conversation_id = accessible_conversation_id(user=user, conversation_id=conversation_id)
    if need is None:
        need = Need.ACT if lock else Need.READ
    conversations = (
        Conversation.objects.visible_to(user)
        .with_role_of(user)
        .filter(parent__isnull=True, deleted_at__isnull=True)
    )
    if lock:
        conversations = conversations.select_for_update(of=("self",))
    try:
        conversation = conversations.get(pk=conversation_id)
    except Conversation.DoesNotExist:
        raise ConversationNotFound from None
    check_role(conversation.viewer_role, need)
    return conversation


def role_of(*, user, conversation_id: int) -> str | None:
    """The user's role in the conversation (`OWNER` or a MemberRole), None for a stranger;
    one query."""
    found = (
        Conversation.objects.with_role_of(user)
        .filter(pk=conversation_id, deleted_at__isnull=True, parent__isnull=True)
        .values_list("viewer_role", flat=True)
        .first()
    )
    return found


def conversation_exists(conversation_id: int) -> bool:
    """Whether the conversation is still there for its people (not deleted): what a socket
    that lost it tells the page, deleted or no longer shared with this user."""
    return Conversation.objects.filter(pk=conversation_id, deleted_at__isnull=True).exists()


def members_of(conversation: Conversation) -> list[Membership]:
    """The people the conversation is shared with, first added first (the caller has checked
    access)."""
    return list(conversation.memberships.select_related("user"))


def people_ids(conversation_id: int) -> list[int]:
    """The owner and every member of the conversation (whose pages hear of what waits in it),
    owner first; one query."""
    found = Conversation.objects.filter(pk=conversation_id).values_list(
        "owner_id", "memberships__user_id"
    )
    ids: list[int] = []
    for owner_id, member_id in found:
        for user_id in (owner_id, member_id):
            if user_id is not None and user_id not in ids:
                ids.append(user_id)
    return ids


def acting_ids(conversation_id: int) -> list[int]:
    """The owner and the participants of the conversation (who may answer its questions),
    owner first; one query."""
    found = Conversation.objects.filter(pk=conversation_id).values_list(
        "owner_id", "memberships__user_id", "memberships__role"
    )
    ids: list[int] = []
    for owner_id, member_id, role in found:
        if owner_id not in ids:
            ids.insert(0, owner_id)
        if role == MemberRole.PARTICIPANT and member_id not in ids:
            ids.append(member_id)
    return ids


def deleted_conversation_for_user(*, user, conversation_id) -> Conversation:
    """The user's conversation deleted and not yet removed for good, locked for the caller's
    transaction (what Undo restores); otherwise ConversationNotFound."""
    conversation_id = accessible_conversation_id(user=user, conversation_id=conversation_id)
    try:
        return (
            Conversation.objects.select_for_update(of=("self",))
            .with_role_of(user)
            .filter(owner=user, parent__isnull=True, deleted_at__isnull=False)
            .get(pk=conversation_id)
        )
    except Conversation.DoesNotExist:
        raise ConversationNotFound from None


# --- What changed after a cursor --------------------------------------------------------------


# A conversation page shows at most this many of its newest messages, and loads as many
# earlier ones at a time ("Load earlier messages"); a tab that missed more changes than this
# gets the newest page again instead of the changes.
PAGE_MESSAGES = 100


def messages_changed_since(
    *, conversation_id: int, after: int, limit: int | None = None
) -> list[Message]:
    """Messages created or changed after the change cursor `after`, in transcript order; with
    `limit`, at most limit + 1 of them (the most recently changed), so a caller can tell
    there were more."""
    changed = Message.objects.select_related("author").filter(
        conversation_id=conversation_id, seq__gt=min(after, MAX_ID)
    )
    if limit is None:
        return list(changed.order_by("order"))
    newest = list(changed.order_by("-seq")[: limit + 1])
    return sorted(newest, key=lambda message: message.order)


def messages_shown(
    conversation: Conversation, message_ids: list[int], *, upto: int
) -> list[Message]:
    """The conversation's messages among `message_ids` that a page at cursor `upto` shows
    (created at or before it; streaming drafts left to their own changes), in transcript
    order, with their cards' tool results read together; for rendering them again
    (core.events.refresh). One query, and one for the results if a card asks."""
    if not message_ids:
        return []
    messages = list(
        Message.objects.select_related("author")
        .filter(
            conversation_id=conversation.pk,
            pk__in=message_ids,
            created_seq__lte=upto,
            is_draft=False,
        )
        .order_by("order")
    )
    ToolResults.share(messages)
    return messages


@dataclass(frozen=True)
class TranscriptChanges:
    """What changed after a client's cursor, and the cursor that covers it."""

    conversation: Conversation  # read last: its state is at least as new as `cursor`
    messages: list[Message]
    cursor: int
    # False: more messages changed than the caller's limit; `messages` holds only some.
    complete: bool = True


def transcript_changes(
    *,
    user,
    conversation_id: int,
    after: int,
    first: Conversation | None = None,
    limit: int | None = None,
) -> TranscriptChanges:
    """Messages changed after `after`, with a cursor such that every change <= cursor is in
    them; with `limit`, marked incomplete when more than `limit` changed (the caller shows
    the newest page instead: conversation_page).

    Change numbers are handed out under the conversation's row lock, so they commit in order:
    everything up to the seq of the conversation read first is committed before the messages
    are read. The conversation is read again at the end, unless nothing newer came, so the
    state shown is never older than the messages. `first`: the conversation as the caller just
    read it through conversation_for_user.
    """
    if first is None:
        first = conversation_for_user(user=user, conversation_id=conversation_id)
    messages = messages_changed_since(conversation_id=first.pk, after=after, limit=limit)
    if limit is not None and len(messages) > limit:
        return TranscriptChanges(conversation=first, messages=[], cursor=after, complete=False)
    ToolResults.share(messages)
    cursor = max([after, first.seq, *(m.seq for m in messages)])
    if cursor == first.seq:
        return TranscriptChanges(conversation=first, messages=messages, cursor=cursor)
    latest = conversation_for_user(user=user, conversation_id=conversation_id)
    return TranscriptChanges(conversation=latest, messages=messages, cursor=cursor)


@dataclass(frozen=True)
class ConversationPage:
    """A conversation as its page shows it: at most PAGE_MESSAGES messages, in transcript
    order."""

    conversation: Conversation
    messages: list[Message]
    # The page's change cursor: every change <= cursor to the page's messages is in them.
    cursor: int
    # The order of the page's first message when earlier ones exist (what "Load earlier
    # messages" asks for), else None.
    earlier: int | None


def conversation_page(
    *, user, conversation_id: int, before: int | None = None, first: Conversation | None = None
) -> ConversationPage:
    """The newest page of the transcript, or with `before` (a message order), the page of
    messages just before it. Two queries and one page of messages, however long the
    transcript (plus the conversation again when it changed meanwhile, as in
    transcript_changes)."""
    if first is None:
        first = conversation_for_user(user=user, conversation_id=conversation_id)
    found = transcript_page(
        Message.objects.select_related("author").filter(conversation_id=first.pk),
        limit=PAGE_MESSAGES,
        before=None if before is None else min(before, MAX_ID),
    )
    page = found.messages
    earlier = page[0].order if found.has_older else None
    # A call's result is stored in the turn that made the call: a page before the newest
    # looks for its calls' results up to a page after it, not to the transcript's end.
    ToolResults.share(page, until=None if before is None else before + PAGE_MESSAGES)
    cursor = max([first.seq, *(m.seq for m in page)])
    conversation = first
    if cursor != first.seq:
        conversation = conversation_for_user(user=user, conversation_id=conversation_id)
    return ConversationPage(
        conversation=conversation, messages=page, cursor=cursor, earlier=earlier
    )


# --- Reading a transcript from its end --------------------------------------------------------

# Transcripts are read backwards this many messages at a time.
NEWEST_FIRST_BATCH = 50


def _newest_first(messages: QuerySet[Message]) -> Iterator[Message]:
    """`messages` newest first, a page at a time: a search that usually ends near the end of
    the transcript costs what the end does, not the whole."""
    below: int | None = None
    while True:
        page = messages if below is None else messages.filter(order__lt=below)
        found = list(page.order_by("-order")[:NEWEST_FIRST_BATCH])
        yield from found
        if len(found) < NEWEST_FIRST_BATCH:
            return
        below = found[-1].order


def assistant_newest_first(conversation_id: int) -> Iterator[Message]:
    """The agent's messages, superseded ones too, newest first: what looks for a tool call's
    message usually finds it in the first page."""
    return _newest_first(
        Message.objects.filter(conversation_id=conversation_id, role=Role.ASSISTANT)
    )


def last_turn_newest_first(
    conversation_id: int, *, before: int | None = None
) -> Iterator[tuple[Message, bool]]:
    """The last turn's messages in the transcript shown (`before`: in the part of it before
    that order), newest first, each with whether it is the user message that started the turn
    (the last one given, if there is one). A user message that answered a question is part of
    its turn, not the start of one: the result naming a reply is stored after the reply, so
    every reply is known as such when reached."""
    replies: set[int] = set()
    shown = Message.objects.filter(conversation_id=conversation_id, superseded=False)
    if before is not None:
        shown = shown.filter(order__lt=before)
    for message in _newest_first(shown):
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


@dataclass(frozen=True)
class LastTurn:
    """The conversation's last turn: the user message that started it, and what followed."""

    prompt: Message
    after: list[Message]

    @property
    def prompt_text(self) -> str:
        return "\n\n".join(b.text for b in self.prompt.parsed_blocks if isinstance(b, TextBlock))


def last_turn(*, conversation_id: int) -> LastTurn | None:
    """The last turn in the transcript shown, or None before the first message."""
    after: list[Message] = []  # newest first
    for message, starts in last_turn_newest_first(conversation_id):
        if starts:
            return LastTurn(prompt=message, after=after[::-1])
        after.append(message)
    return None


def turns_from(*, conversation_id: int, message_id: int) -> list[Message] | None:
    """The shown transcript from the user message `message_id` on, when that message started
    a turn (not one that answered a question, nor a superseded one); else None."""
    replies: set[int] = set()
    shown = Message.objects.filter(conversation_id=conversation_id, superseded=False)
    start = shown.filter(pk=message_id, role=Role.USER).first()
    if start is None:
        return None
    messages = list(shown.filter(order__gte=start.order).order_by("order"))
    for message in messages:
        if message.role == Role.TOOL:
            replies.update(
                block.reply_message_id
                for block in parse_blocks(message.blocks)
                if isinstance(block, ToolResultBlock) and block.reply_message_id is not None
            )
    return None if start.pk in replies else messages


# --- Tool results, shown on their call's card ---------------------------------------------------


def tool_result(*, message: Message, call_id: str) -> ToolResultBlock | None:
    """The result of the tool call `call_id` made in `message`, once there is one: the first
    with that id in a later tool message shown. Messages read together share one reading of
    the results for all their cards (ToolResults.share)."""
    results = getattr(message, ToolResults.ATTRIBUTE, None)
    if results is None:
        results = ToolResults(message.conversation_id, after=message.order)
    return results.of(message, call_id)


class ToolResults:
    """The tool results of a conversation after one place in its transcript, read in one
    query when the first card asks."""

    ATTRIBUTE = "parley_tool_results"

    def __init__(self, conversation_id: int, *, after: int, until: int | None = None) -> None:
        self.conversation_id = conversation_id
        self.after = after
        self.until = until

    @classmethod
    def share(cls, messages: list[Message], *, until: int | None = None) -> None:
        """Let `messages` (of one conversation) find their calls' results together: those
        stored after the first of them (and before the message order `until`)."""
        if messages:
            after = min(m.order for m in messages)
            results = cls(messages[0].conversation_id, after=after, until=until)
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
        if self.until is not None:
            later = later.filter(order__lt=self.until)
        for result_message in later.only("order", "blocks"):
            for block in parse_blocks(result_message.blocks):
                if isinstance(block, ToolResultBlock):
                    by_call.setdefault(block.tool_call_id, []).append((result_message.order, block))
        return by_call


# --- Sub-agents, as their parent shows them -----------------------------------------------------

# The error a sub-agent's transcript ends with when it was stopped with its parent (stored as
# this English msgid, translated when shown).
SUBAGENT_STOPPED = gettext_noop("Stopped together with the agent that started it.")

SUBAGENT_STATUS_LABELS = {
    "running": _("Working…"),
    "done": _("Done"),
    "failed": _("Failed"),
    "stopped": _("Stopped"),
}


@dataclass(frozen=True)
class Subagent:
    """A child conversation as its parent shows it."""

    conversation: Conversation
    status: str  # running, done, failed or stopped
    messages: list[Message]

    @property
    def pk(self) -> int:
        return self.conversation.pk

    @property
    def number(self) -> int:
        return self.conversation.subagent_index + 1

    @property
    def status_label(self) -> str:
        return str(SUBAGENT_STATUS_LABELS[self.status])

    @property
    def answer(self) -> str:
        """The last thing the sub-agent said (its final answer, once done)."""
        for message in reversed(self.messages):
            if message.role == Role.ASSISTANT and not message.is_draft:
                text = "\n".join(
                    b.text for b in parse_blocks(message.blocks) if isinstance(b, TextBlock)
                ).strip()
                if text:
                    return text
        return ""

    @property
    def error(self) -> str:
        for message in reversed(self.messages):
            for block in parse_blocks(message.blocks):
                if isinstance(block, ErrorBlock):
                    return block.message
        return ""


def _subagent_status(child: Conversation, messages: list[Message]) -> str:
    if child.is_running:
        return "running"
    if child.agent_state == AgentState.IDLE:
        return "done"
    last = messages[-1] if messages else None
    if last is not None and any(
        isinstance(b, ErrorBlock) and b.message == SUBAGENT_STOPPED
        for b in parse_blocks(last.blocks)
    ):
        return "stopped"
    return "failed"


def subagent_view(child: Conversation) -> Subagent:
    messages = list(child.messages.order_by("order"))
    return Subagent(child, _subagent_status(child, messages), messages)


def subagents_of(parent: Conversation, call_id: str | None = None) -> list[Subagent]:
    """The children of `parent` (those of one call, with `call_id`), in spawn order. The
    caller has checked the user may read `parent`."""
    children = parent.children.order_by("pk")
    if call_id is not None:
        children = children.filter(parent_tool_call_id=call_id).order_by("subagent_index")
    return [subagent_view(child) for child in children]


def changed_subagents(parent: Conversation, known: dict[int, int]) -> list[Subagent]:
    """Children changed since the change cursors in `known` (child id -> seq; an unknown
    child counts as changed)."""
    return [
        subagent_view(child)
        for child in parent.children.order_by("pk")
        if child.seq > known.get(child.pk, -1)
    ]
