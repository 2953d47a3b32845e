"""Writes to a conversation's transcript: the one place messages are added, changed or
superseded, shared by the people's services and the turn state machine.

A `Transcript` edits one conversation inside the caller's transaction, with the conversation's
row locked (`lock`, or `chat.selectors.conversation_for_user(lock=True)`). Each change takes
the next value of the conversation's change cursor (`seq`), which the messages it writes
carry; when the edit ends, the conversation's row is saved once (its cursor, its activity
time and whatever else the caller changed on it, such as the agent's state) and one
`chat.changed` event for the newest change leaves after commit. A tab that has seen every
change up to N asks for what changed after N (chat.selectors.transcript_changes).
"""

from django.utils import timezone

from chat.blocks import (
    Block,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    dump_blocks,
    parse_blocks,
    searchable_text,
)
from chat.errors import ConversationNotFound
from chat.models import Conversation, Message, Role
from chat.selectors import assistant_newest_first
from core import events


def lock(conversation_id: int) -> Conversation:
    """The conversation, its row locked for the rest of the transaction (no access check:
    the turn's runner and the background jobs, which act for the owner)."""
    try:
        return Conversation.objects.select_for_update(of=("self",)).get(pk=conversation_id)
    except Conversation.DoesNotExist:
        raise ConversationNotFound from None


def draft_text(message: Message) -> str | None:
    """A streaming draft's text (a draft is one text block while it streams), else None."""
    blocks = message.blocks
    if message.is_draft and len(blocks) == 1 and blocks[0].get("type") == "text":
        text = blocks[0].get("text")
        return text if isinstance(text, str) else None
    return None


class Transcript:
    """`with Transcript(conversation) as transcript:` the changes to one locked conversation
    in this transaction. The row is saved, and the event sent after commit, as the block ends
    without an exception (an exception leaves both to the transaction's rollback)."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.seq_before = conversation.seq
        self._newest: Message | None = None
        self._newest_read = False
        # The `order` of the first message this edit appended (None: none yet).
        self.first_appended: int | None = None
        self._appended: dict | None = None  # the edit's one change, if it was a streamed append
        self._calls_shown: set[str] = set()  # tool calls in messages this edit wrote

    def __enter__(self) -> "Transcript":
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        if error_type is None:
            self.save()

    @property
    def changes(self) -> int:
        return self.conversation.seq - self.seq_before

    def save(self) -> None:
        """Save what changed of the conversation's row and announce the newest change (after
        commit)."""
        conversation = self.conversation
        changed = conversation.changed_fields()
        if changed is None:
            conversation.save(force_update=True)
        elif changed:
            conversation.save(update_fields=changed)
        if not self.changes:
            return
        appended = self._appended if self.changes == 1 else None
        events.send_on_commit(
            events.conversation_group(conversation.pk),
            events.conversation_changed(conversation.pk, conversation.seq, appended=appended),
        )
        if conversation.parent_id is not None:
            # A sub-agent is watched through its parent's page and streams; the parent's row
            # is not touched, so a child's writes never wait on its parent's lock.
            events.send_on_commit(
                events.conversation_group(conversation.parent_id),
                events.subagent_changed(conversation.parent_id, conversation.pk, conversation.seq),
            )

    def touch(self) -> int:
        """A change of the conversation itself (its title, the agent's state): the next
        cursor, which open pages read the conversation again at."""
        self.conversation.seq += 1
        self.conversation.updated_at = timezone.now()
        return self.conversation.seq

    def wrote(self, message: Message) -> bool:
        """Whether `message` was written by this edit (open pages read it after commit)."""
        return message.seq > self.seq_before

    def newest(self) -> Message | None:
        """The conversation's newest message, superseded or not (read once per edit)."""
        if not self._newest_read:
            self._newest = (
                Message.objects.filter(conversation=self.conversation).order_by("-order").first()
            )
            self._newest_read = True
        return self._newest

    def append(
        self, *, role: Role, blocks: list[Block], is_draft: bool = False, author=None
    ) -> Message:
        """A new message at the transcript's end; `author`: the person who wrote it."""
        order = self.conversation.message_count
        self.conversation.message_count = order + 1
        seq = self.touch()
        if self.first_appended is None:
            self.first_appended = order
        message = Message.objects.create(
            conversation=self.conversation,
            role=role,
            author=author,
            order=order,
            blocks=dump_blocks(blocks),
            search_text=searchable_text(blocks),
            is_draft=is_draft,
            created_seq=seq,
            seq=seq,
            created_at=self.conversation.updated_at,
            updated_at=self.conversation.updated_at,
        )
        self._newest, self._newest_read = message, True
        self._show_results(blocks)
        return message

    def update(
        self,
        message: Message,
        *,
        blocks: list[Block],
        is_draft: bool = False,
        appended: dict | None = None,
    ) -> Message:
        """Replace the message's blocks. `appended`: the change only adds text to a streaming
        draft (stream_into_draft)."""
        message.blocks = dump_blocks(blocks)
        message.search_text = searchable_text(blocks)
        message.is_draft = is_draft
        self._changed(message, "blocks", "search_text", "is_draft")
        self._calls_shown.update(b.id for b in blocks if isinstance(b, ToolCallBlock))
        if appended is not None and self.changes == 1:
            self._appended = appended
        return message

    def stream_into_draft(self, draft: Message, text: str) -> Message:
        """The streaming draft's text is now `text`. When it only grew, the change's event
        carries the new part, so open pages append it without reading the transcript."""
        before = draft_text(draft)
        appended = None
        if before is not None and len(text) > len(before) and text.startswith(before):
            appended = {"message": draft.pk, "at": len(before), "text": text[len(before) :]}
        return self.update(draft, blocks=[TextBlock(text=text)], is_draft=True, appended=appended)

    def supersede(self, messages: list[Message]) -> None:
        """Take `messages` out of the transcript shown and the model's view, keeping them
        stored; open pages replace each with nothing."""
        for message in messages:
            message.superseded = True
            self._changed(message, "superseded")

    def _changed(self, message: Message, *fields: str) -> None:
        message.version += 1
        message.seq = self.touch()
        message.updated_at = self.conversation.updated_at
        message.save(update_fields=[*fields, "version", "seq", "updated_at"])

    def _show_results(self, blocks: list[Block]) -> None:
        """A tool result is shown on its call's card: the message holding the call changes
        too, so open pages render the card again with the result (unless this edit wrote it
        already, as answering a question does)."""
        call_ids = {b.tool_call_id for b in blocks if isinstance(b, ToolResultBlock)}
        call_ids -= self._calls_shown
        if not call_ids:
            return
        for message in assistant_newest_first(self.conversation.pk):
            if message.superseded:
                continue
            found = {
                b.id
                for b in parse_blocks(message.blocks)
                if isinstance(b, ToolCallBlock) and b.id in call_ids
            }
            if found and not self.wrote(message):
                self._changed(message)
                self._calls_shown.update(found)
            call_ids -= found
            if not call_ids:
                return
