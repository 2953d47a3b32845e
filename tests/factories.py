"""Test data written through the same writes the app uses."""

import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from chat import sharing
from chat.blocks import TextBlock
from chat.engine import turns
from chat.live.consumers import ConversationConsumer
from chat.models import AgentState, Conversation, MemberRole, Message, Role
from chat.transcript import Transcript, lock


def add_message(conversation_id: int, text: str, *, role=Role.ASSISTANT, message_id=None) -> int:
    """Append a message (or replace the text of `message_id`); returns its id."""
    with transaction.atomic(), Transcript(lock(conversation_id)) as transcript:
        if message_id is None:
            return transcript.append(role=role, blocks=[TextBlock(text=text)]).pk
        message = transcript.conversation.messages.get(pk=message_id)
        transcript.update(message, blocks=[TextBlock(text=text)])
        return message_id


def long_conversation(owner: str, *, messages: int, title: str, shared_with: str = "") -> int:
    """A conversation of `owner`'s (a username) with `messages` alternating messages, each a
    few lines long, shared with `shared_with` as a participant if given; returns its id."""
    user = get_user_model().objects.get(username=owner)
    conversation = Conversation.objects.create(owner=user, title=title)
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        for index in range(messages):
            role = Role.USER if index % 2 == 0 else Role.ASSISTANT
            text = f"Message number {index}. " + "Some words to read. " * 12
            transcript.append(role=role, blocks=[TextBlock(text=text)])
    if shared_with:
        sharing.share_conversation(
            user=user,
            conversation_id=conversation.pk,
            username=shared_with,
            role=MemberRole.PARTICIPANT,
        )
    return conversation.pk


def set_state(conversation_id: int, state: AgentState) -> None:
    with transaction.atomic(), Transcript(lock(conversation_id)) as transcript:
        transcript.conversation.agent_state = state
        transcript.touch()


def claim(conversation_id: int) -> turns.Claim:
    with transaction.atomic():
        return turns.claim(conversation_id)


def fail_turn(conversation_id: int, message: str = turns.AGENT_FAILED) -> None:
    """Put the conversation through a failed turn: error state and a retryable error block."""
    set_state(conversation_id, AgentState.LLM_REQUESTING)
    turns.fail(claim(conversation_id).lease, message)


def started_step(conversation_id: int) -> turns.Lease:
    """A runner claimed the running turn and started its model request; its lease."""
    set_state(conversation_id, AgentState.LLM_REQUESTING)
    lease = claim(conversation_id).lease
    turns.begin_step(lease)
    return lease


def lapse_lease(conversation_id: int) -> None:
    """The runner holding the turn died: its lease lapses."""
    Conversation.objects.filter(pk=conversation_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def count_loaded_messages(monkeypatch) -> list:
    """From now on, one item for each Message instance read from the database."""
    loaded = []
    from_db = Message.from_db.__func__
    monkeypatch.setattr(
        Message,
        "from_db",
        classmethod(lambda *args, **kwargs: loaded.append(1) or from_db(*args, **kwargs)),
    )
    return loaded


def tab_on(user, conversation_id: int, *, sent_seq: int | None = None) -> ConversationConsumer:
    """A conversation socket's consumer, as `connect` leaves it, its session just read (and
    synced at `sent_seq`), to call its renders on the test's thread."""
    tab = ConversationConsumer()
    tab.scope = {"cookies": {}, "headers": []}
    tab.user, tab.conversation_id = user, conversation_id
    tab.sent_subagents, tab.sent_drafts, tab.header_key = {}, {}, None
    tab.sent_seq = sent_seq
    tab.session_read_at = time.monotonic()
    tab.created_at = Conversation.objects.get(pk=conversation_id).created_at
    return tab
