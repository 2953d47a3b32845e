"""Writes people make: conversations and messages; and search, the one read limited per
person. Views, consumers and the API call these.

Each service fetches the conversation through `conversation_for_user(lock=True)` first (it
checks the user may act on it and locks the row), changes the transcript through one
`Transcript`, moves the turn through the state machine (chat.engine.turns), and hands what
the change asks for (a runner for the turn) to dispatch, which acts after commit: after the
change's own event, so open pages hear of the change before of what follows it.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat import limits
from chat.blocks import TextBlock
from chat.engine import dispatch, tools, turns
from chat.errors import (
    AgentBusy,
    EmptyMessage,
    MessageNotEditable,
    MessageTooLong,
    NothingToRegenerate,
    NothingToRetry,
    NothingToStop,
    QuestionPending,
    SearchTooLong,
)
from chat.markdown import plain_text
from chat.models import Agent, AgentState, Conversation, Message, Role
from chat.selectors import (
    Need,
    conversation_for_user,
    conversations_for_user,
    deleted_conversation_for_user,
    last_turn,
    search_conversations_for_user,
    turns_from,
)
from chat.transcript import Transcript
from core import events
from core.limits import check_conversation_rate, check_message_rate
from core.text import clean_message, clean_text

TITLE_MAX_CHARS = Conversation._meta.get_field("title").max_length
# The longest search: words enough for any search a person types, few enough that no
# search is costly for its length.
SEARCH_MAX_CHARS = 200
AUTO_TITLE_CHARS = 60


def search_conversations(*, user, query: str, limit: int | None = None) -> list[Conversation]:
    """Up to `limit` of the user's conversations that match `query`, most recently active
    first (chat.selectors.search_conversations_for_user); with no words, the most recent.

    Raises SearchTooLong (past SEARCH_MAX_CHARS), TooManySearches or SearchRunning (another
    search of the user's runs: chat.limits), or SearchTooSlow.
    """
    query = clean_search(query)
    if not query:
        return list(conversations_for_user(user=user)[:limit])
    if len(query) > SEARCH_MAX_CHARS:
        raise SearchTooLong(SEARCH_MAX_CHARS)
    limits.check_search_rate(user=user)
    with limits.search_slot(user=user):
        return search_conversations_for_user(user=user, query=query, limit=limit)


def clean_search(query: str) -> str:
    """The words of a search, as shown back in its box: invisible characters (NUL among
    them, which PostgreSQL refuses) dropped, whitespace collapsed."""
    return clean_text(query)


def create_conversation(*, owner, title: str = "", agent: Agent = Agent.PARLEY) -> Conversation:
    """A new conversation (`agent`: who asks in it). Raises TooManyConversations past the
    user's rate (core.limits)."""
    check_conversation_rate(user=owner)
    conversation = Conversation.objects.create(owner=owner, title=_clean_title(title), agent=agent)
    _listed(conversation)
    return conversation


def _listed(conversation: Conversation) -> None:
    """The owner's open pages list the new conversation (their sidebars load again), wherever
    it was made: another tab, the API, the terminal, an MCP client."""
    owner_id = conversation.owner_id
    events.send_on_commit(
        events.user_group(owner_id), events.access_changed(owner_id, conversation.pk)
    )


def start_conversation(*, owner, text: str) -> Message:
    """A new conversation, begun by the person's first message (its turn starts as with
    post_user_message): nothing is created for a message refused. Raises what
    post_user_message raises, and TooManyConversations."""
    if not clean_message(text):
        raise EmptyMessage
    check_conversation_rate(user=owner)
    text = _checked_message(user=owner, text=text)
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=owner)
        _listed(conversation)
        return _append_user_message(user=owner, conversation_id=conversation.pk, text=text)


@transaction.atomic
def rename_conversation(*, user, conversation_id: int, title: str) -> Conversation:
    conversation = conversation_for_user(
        user=user, conversation_id=conversation_id, lock=True, need=Need.MANAGE
    )
    with Transcript(conversation) as transcript:
        conversation.title = _clean_title(title)
        transcript.touch()
    return conversation


@transaction.atomic
def pin_conversation(*, user, conversation_id: int, pinned: bool) -> Conversation:
    """Keep the conversation at the top of the sidebar, or no longer. Not an activity: its
    place among the others stays where it was."""
    conversation = conversation_for_user(
        user=user, conversation_id=conversation_id, lock=True, need=Need.MANAGE
    )
    if conversation.pinned != pinned:
        conversation.pinned = pinned
        conversation.save(update_fields=["pinned"])
    return conversation


@transaction.atomic
def delete_conversation(*, user, conversation_id: int) -> None:
    """Delete the conversation, undoably for DELETE_UNDO_SECONDS (restore_conversation): it
    leaves every page and listing at once, its running turn stops, and the sweep removes it
    for good afterwards (purge_deleted)."""
    conversation = conversation_for_user(
        user=user, conversation_id=conversation_id, lock=True, need=Need.MANAGE
    )
    next = None
    with Transcript(conversation) as transcript:
        if conversation.is_running:
            next = turns.stop_turn(transcript)
        _mark_deleted(transcript, timezone.now())
    # Open tabs re-read, find nothing, and close their socket.
    if next is not None:
        dispatch.on_commit(next)
    _tell_pages(user, conversation)


@transaction.atomic
def restore_conversation(*, user, conversation_id: int) -> Conversation:
    """Undo delete_conversation, until the sweep removed the conversation for good; then
    ConversationNotFound."""
    conversation = deleted_conversation_for_user(user=user, conversation_id=conversation_id)
    with Transcript(conversation) as transcript:
        _mark_deleted(transcript, None)
    _tell_pages(user, conversation)
    return conversation


def _mark_deleted(transcript: Transcript, deleted_at) -> None:
    """A change open pages hear of; not an activity: restored, the conversation is back in
    its place among the others."""
    conversation = transcript.conversation
    active = conversation.updated_at
    conversation.deleted_at = deleted_at
    transcript.touch()
    conversation.updated_at = active


def _tell_pages(user, conversation: Conversation) -> None:
    """Everyone's pages recount what waits (if it waited), and the members' sidebars follow."""
    if conversation.agent_state == AgentState.AWAITING_USER:
        turns.attention_changed(conversation, waiting=False)
    if not conversation.shared:
        return
    for member_id in conversation.memberships.values_list("user_id", flat=True):
        events.send_on_commit(
            events.user_group(member_id), events.access_changed(member_id, conversation.pk)
        )


def purge_deleted() -> None:
    """Remove for good the conversations deleted more than DELETE_UNDO_SECONDS ago (a sweep
    job: safe to run in several processes at once)."""
    before = timezone.now() - timedelta(seconds=settings.PARLEY_DELETE_UNDO_SECONDS)
    Conversation.objects.filter(deleted_at__lt=before).delete()


def post_user_message(*, user, conversation_id: int, text: str) -> Message:
    """Append the user's message and start the agent's turn; while the turn is paused (a
    question is pending), the message resolves the pause instead (the pausing tool decides
    how: chat.engine.tools.Tool.resolve_by_message).

    Raises EmptyMessage, MessageTooLong, AgentBusy (a turn is running), ConversationNotFound,
    TooManyMessages (core.limits) or TooManyRunningTurns (chat.limits).
    """
    text = _checked_message(user=user, text=text)
    return _append_user_message(user=user, conversation_id=conversation_id, text=text)


def _checked_message(*, user, text: str) -> str:
    """The message to store; raises EmptyMessage, MessageTooLong or TooManyMessages. Before
    any transaction: a flood is refused without taking a lock."""
    text = clean_message(text)
    if not text:
        raise EmptyMessage
    if len(text) > settings.PARLEY_MAX_MESSAGE_CHARS:
        raise MessageTooLong
    check_message_rate(user=user)
    return text


@transaction.atomic
def _append_user_message(*, user, conversation_id: int, text: str) -> Message:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.is_running:
        raise AgentBusy
    paused = conversation.agent_state == AgentState.AWAITING_USER
    if not paused:
        limits.check_turn_slot(user=user, conversation=conversation)
    if not conversation.title:
        conversation.title = _auto_title(text)
    # The pausing call is the turn's first open one (read before the message joins the turn).
    open_calls = turns.open_tool_calls(conversation) if paused else []
    with Transcript(conversation) as transcript:
        message = transcript.append(role=Role.USER, blocks=[TextBlock(text=text)], author=user)
        next = _resolve_pause_by_message(transcript, open_calls, message, user) if paused else None
        if next is None:
            # No pause (or none that anything still waits on): the message starts a new turn.
            next = turns.begin_turn(transcript, by=user)
    dispatch.on_commit(next)
    return message


def _resolve_pause_by_message(
    transcript: Transcript, open_calls: list, message: Message, user
) -> dispatch.Next | None:
    """The pausing call's tool takes the message as the resolution (a question: as the
    answer); None if nothing waits for it."""
    for resolver in tools.message_resolvers:
        if (next := resolver(transcript, message, user)) is not None:
            return next
    tool = tools.registered(open_calls[0].name) if open_calls else None
    return tool.resolve_by_message(transcript, open_calls[0], message, user) if tool else None


def retry_turn(*, user, conversation_id: int) -> None:
    """Run the agent again after a failed turn. A retry counts as a message sent
    (PARLEY_MESSAGES_PER_MINUTE): it costs a model turn like one."""
    check_message_rate(user=user)
    _retry_turn(user=user, conversation_id=conversation_id)


@transaction.atomic
def _retry_turn(*, user, conversation_id: int) -> None:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.agent_state != AgentState.ERROR:
        raise NothingToRetry
    limits.check_turn_slot(user=user, conversation=conversation)
    with Transcript(conversation) as transcript:
        next = turns.begin_turn(transcript, by=user, retrying=True)
    dispatch.on_commit(next)


def regenerate_reply(*, user, conversation_id: int) -> None:
    """Answer the last user message again: the last reply is superseded (kept, not shown,
    not sent to the model) and a new turn starts. Counts as a message sent, as an edit does.

    Raises AgentBusy, QuestionPending, NothingToRegenerate, ConversationNotFound,
    TooManyMessages or TooManyRunningTurns.
    """
    check_message_rate(user=user)
    _regenerate_reply(user=user, conversation_id=conversation_id)


@transaction.atomic
def _regenerate_reply(*, user, conversation_id: int) -> None:
    conversation = _lock_between_turns(user=user, conversation_id=conversation_id)
    turn = last_turn(conversation_id=conversation.pk)
    if turn is None or not turn.after:
        raise NothingToRegenerate
    limits.check_turn_slot(user=user, conversation=conversation)
    with Transcript(conversation) as transcript:
        transcript.supersede(turn.after)
        next = turns.begin_turn(transcript, by=user)
    dispatch.on_commit(next)


def edit_message(*, user, conversation_id: int, message_id: int, text: str) -> Message:
    """Replace the user message `message_id` with `text` and answer it anew: it and every
    message after it are superseded (kept, not shown, not sent to the model). An edited
    first message renames a conversation that still has the title it was given from it.

    Raises what post_user_message raises, QuestionPending, and MessageNotEditable when
    `message_id` is not a shown user message that started a turn.
    """
    text = _checked_message(user=user, text=text)
    return _replace_message(
        user=user, conversation_id=conversation_id, message_id=message_id, text=text
    )


@transaction.atomic
def _replace_message(*, user, conversation_id: int, message_id: int, text: str) -> Message:
    conversation = _lock_between_turns(user=user, conversation_id=conversation_id)
    replaced = turns_from(conversation_id=conversation.pk, message_id=message_id)
    if not replaced:
        raise MessageNotEditable
    limits.check_turn_slot(user=user, conversation=conversation)
    old = replaced[0]
    first = not conversation.messages.filter(
        role=Role.USER, superseded=False, order__lt=old.order
    ).exists()
    if first and conversation.title == _auto_title(old.plain_text):
        conversation.title = _auto_title(text)
    with Transcript(conversation) as transcript:
        transcript.supersede(replaced)
        message = transcript.append(role=Role.USER, blocks=[TextBlock(text=text)], author=user)
        next = turns.begin_turn(transcript, by=user)
    dispatch.on_commit(next)
    return message


def _lock_between_turns(*, user, conversation_id: int) -> Conversation:
    """The conversation, locked, when no turn is running or paused for the user."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.is_running:
        raise AgentBusy
    if conversation.agent_state == AgentState.AWAITING_USER:
        raise QuestionPending
    return conversation


@transaction.atomic
def stop_turn(*, user, conversation_id: int) -> None:
    """Stop the running turn, keeping what the agent wrote so far."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if not conversation.is_running:
        raise NothingToStop
    with Transcript(conversation) as transcript:
        next = turns.stop_turn(transcript)
    dispatch.on_commit(next)


def _clean_title(title: str) -> str:
    return clean_text(title)[:TITLE_MAX_CHARS]


def _auto_title(text: str) -> str:
    """A first message's words without their markdown (its text as typed, if it is all
    marks), cut to AUTO_TITLE_CHARS."""
    title = plain_text(text) or " ".join(text.split())
    if len(title) > AUTO_TITLE_CHARS:
        title = title[: AUTO_TITLE_CHARS - 1].rstrip() + "…"
    return title
