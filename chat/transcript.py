"""Low-level transcript writes shared by the services and the turn state machine.

Every function here expects the caller to hold the conversation's row lock (see `lock`), and
each change advances the conversation's change cursor and pushes `chat.changed` after commit.

The locked instance is read in the transaction that writes through it, so it also remembers
what that transaction did: the change cursor before its first write (messages with a later
`seq` were changed by it) and the `order` of the last message it appended.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.utils import timezone

from chat import events
from chat.blocks import (
    Block,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    dump_blocks,
    parse_blocks,
    searchable_text,
)
from chat.compiled import CompiledQuery, insert, save_fields
from chat.errors import ConversationNotFound
from chat.models import Conversation, Message, Role
from chat.selectors import assistant_newest_first

# Every step of a turn starts with it (chat.compiled).
_LOCK = CompiledQuery(
    lambda pk: Conversation.objects.filter(pk=pk).select_for_update(of=("self",)).order_by()
)


# The newest message (its order), which the first message a transaction appends follows.
_NEWEST = CompiledQuery(
    lambda conversation_id: (
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("-order")
        .only("pk", "order")[:1]
    )
)


def lock(conversation_id: int) -> Conversation:
    """The conversation, locked for the rest of the transaction (no access check)."""
    conversation = _LOCK.first(pk=conversation_id)
    if conversation is None:
        raise ConversationNotFound
    return conversation


def save_conversation(conversation: Conversation, *, appended: dict | None = None) -> int:
    """Save the conversation as a change: advance its change cursor, save it, and push the
    change after commit. Returns the new cursor. `appended`: the change is only text added to
    a streaming draft (events.conversation_changed)."""
    conversation.__dict__.setdefault(_SEQ_BEFORE_WRITES, conversation.seq)
    conversation.seq += 1
    conversation.updated_at = timezone.now()
    if _WRITE_LATER in conversation.__dict__:
        conversation.__dict__[_WRITE_LATER] = True
    else:
        save_fields(conversation)
    events.send_conversation_event_on_commit(
        conversation.pk,
        events.conversation_changed(conversation.pk, conversation.seq, appended=appended),
    )
    if conversation.parent_id is not None:
        # A sub-agent is watched through its parent's page and streams: tell them too. The
        # parent's row is not touched, so a child's writes never wait on its parent's lock.
        events.send_conversation_event_on_commit(
            conversation.parent_id,
            events.subagent_changed(conversation.parent_id, conversation.pk, conversation.seq),
        )
    return conversation.seq


_SEQ_BEFORE_WRITES = "parley_seq_before_writes"
_LAST_ORDER = "parley_last_order"
_WRITE_LATER = "parley_write_later"


@contextmanager
def one_write(conversation: Conversation) -> Iterator[None]:
    """The changes made through `conversation` inside write its row once, as they end: an
    answer's changes (the reply, the question's card, the tool result, the running state with
    its draft) wrote it four times, each statement with every column. Each change keeps its
    own cursor and event. Nothing inside may read the row again (the transcript's reads and
    writes here do not); an exception leaves it unwritten, for the transaction to roll back."""
    if _WRITE_LATER in conversation.__dict__:  # already inside one: that one writes it
        yield
        return
    conversation.__dict__[_WRITE_LATER] = False
    try:
        yield
    except BaseException:
        del conversation.__dict__[_WRITE_LATER]
        raise
    if conversation.__dict__.pop(_WRITE_LATER):
        save_fields(conversation)


def changed_by_this_transaction(conversation: Conversation, message: Message) -> bool:
    """Whether `message` was written through `conversation` in this transaction (so open
    pages read it after commit, as it is then)."""
    before = conversation.__dict__.get(_SEQ_BEFORE_WRITES)
    return before is not None and message.seq > before


def append_message(
    conversation: Conversation, *, role: Role, blocks: list[Block], is_draft: bool = False
) -> Message:
    last = conversation.__dict__.get(_LAST_ORDER)
    if last is None:
        newest = _NEWEST.first(conversation_id=conversation.pk)
        last = None if newest is None else newest.order
    seq = save_conversation(conversation)
    order = 0 if last is None else last + 1
    message = Message(
        conversation=conversation,
        role=role,
        order=order,
        blocks=dump_blocks(blocks),
        search_text=searchable_text(blocks),
        is_draft=is_draft,
        created_seq=seq,
        seq=seq,
        created_at=conversation.updated_at,
        updated_at=conversation.updated_at,
    )
    insert(message)
    conversation.__dict__[_LAST_ORDER] = order
    _refresh_calls_answered(conversation, blocks)
    return message


def draft_text(message: Message) -> str | None:
    """A streaming draft's text (a draft is one text block while it streams), else None."""
    blocks = message.blocks
    if message.is_draft and len(blocks) == 1 and blocks[0].get("type") == "text":
        text = blocks[0].get("text")
        return text if isinstance(text, str) else None
    return None


def stream_into_draft(conversation: Conversation, draft: Message, text: str) -> Message:
    """The streaming draft's text is now `text`. When it only grew, the change's event carries
    the new part, so open pages append it without reading the transcript again."""
    before = draft_text(draft)
    appended = None
    if before is not None and len(text) > len(before) and text.startswith(before):
        appended = {"message": draft.pk, "at": len(before), "text": text[len(before) :]}
    return update_message(
        conversation, draft, blocks=[TextBlock(text=text)], is_draft=True, appended=appended
    )


def update_message(
    conversation: Conversation,
    message: Message,
    *,
    blocks: list[Block],
    is_draft: bool,
    appended: dict | None = None,
) -> Message:
    message.blocks = dump_blocks(blocks)
    message.search_text = searchable_text(blocks)
    message.is_draft = is_draft
    message.version += 1
    message.seq = save_conversation(conversation, appended=appended)
    message.updated_at = conversation.updated_at
    save_fields(message, ["blocks", "search_text", "is_draft", "version", "seq", "updated_at"])
    return message


def supersede(conversation: Conversation, messages: list[Message]) -> None:
    """Take `messages` out of the transcript and the model's view, keeping them stored; open
    pages replace each with nothing."""
    for message in messages:
        message.superseded = True
        message.version += 1
        message.seq = save_conversation(conversation)
        message.updated_at = conversation.updated_at
        save_fields(message, ["superseded", "version", "seq", "updated_at"])


def _refresh_calls_answered(conversation: Conversation, blocks: list[Block]) -> None:
    """A tool result is shown on its call's card: mark the message holding the call changed,
    so open pages render the card again, now with the result (unless this transaction changed
    it already, as answering a question does)."""
    call_ids = {b.tool_call_id for b in blocks if isinstance(b, ToolResultBlock)}
    if not call_ids:
        return
    # Newest first, a page at a time: the call is usually in the last few messages.
    for message in assistant_newest_first(conversation.pk):
        if message.superseded:
            continue
        found = {
            b.id
            for b in parse_blocks(message.blocks)
            if isinstance(b, ToolCallBlock) and b.id in call_ids
        }
        if found and not changed_by_this_transaction(conversation, message):
            message.version += 1
            message.seq = save_conversation(conversation)
            message.updated_at = conversation.updated_at
            save_fields(message, ["version", "seq", "updated_at"])
        call_ids -= found
        if not call_ids:
            return
