"""Writes people make: conversations and messages. Views, consumers and the API call these.

Agent state changes go through chat.turns, the turn state machine; transcript writes advance
the conversation's change cursor under its row lock and push `chat.changed` after commit.
"""

from django.conf import settings
from django.db import transaction

from chat import events, limits, pausing, transcript, turns
from chat.blocks import TextBlock
from chat.errors import AgentBusy, EmptyMessage, MessageTooLong, NothingToRetry, NothingToStop
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import conversation_for_user
from chat.text import clean_message, clean_text

TITLE_MAX_CHARS = Conversation._meta.get_field("title").max_length
AUTO_TITLE_CHARS = 60


def create_conversation(*, owner, title: str = "") -> Conversation:
    """A new conversation. Raises TooManyConversations past the user's rate (chat.limits)."""
    limits.check_conversation_rate(user=owner)
    return Conversation.objects.create(owner=owner, title=_clean_title(title))


@transaction.atomic
def rename_conversation(*, user, conversation_id: int, title: str) -> Conversation:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    conversation.title = _clean_title(title)
    transcript.save_conversation(conversation)
    return conversation


@transaction.atomic
def delete_conversation(*, user, conversation_id: int) -> None:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    seq = conversation.seq + 1
    waiting = conversation.agent_state == AgentState.AWAITING_USER
    conversation.delete()
    # Open tabs re-read, find nothing, and close their socket.
    events.send_conversation_event_on_commit(
        conversation_id, events.conversation_changed(conversation_id, seq)
    )
    if waiting:  # its question no longer waits: the user's pages recount
        events.send_user_event_on_commit(
            user.pk, events.attention_changed(user.pk, conversation_id)
        )


def post_user_message(*, user, conversation_id: int, text: str) -> Message:
    """Append the user's message and start the agent's turn; while the turn is paused (a
    question is pending), the message resolves the pause instead (chat.pausing).

    Raises EmptyMessage, MessageTooLong, AgentBusy (a turn is running), ConversationNotFound,
    TooManyMessages or TooManyRunningTurns (chat.limits).
    """
    text = clean_message(text)
    if not text:
        raise EmptyMessage
    if len(text) > settings.PARLEY_MAX_MESSAGE_CHARS:
        raise MessageTooLong
    # Before the transaction: a flood is refused without taking any lock.
    limits.check_message_rate(user=user)
    return _append_user_message(user=user, conversation_id=conversation_id, text=text)


@transaction.atomic
def _append_user_message(*, user, conversation_id: int, text: str) -> Message:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.is_running:
        raise AgentBusy
    if conversation.agent_state != AgentState.AWAITING_USER:
        limits.check_turn_slot(user=user, conversation=conversation)
    if not conversation.title:
        conversation.title = _auto_title(text)
    message = transcript.append_message(conversation, role=Role.USER, blocks=[TextBlock(text=text)])
    if conversation.agent_state == AgentState.AWAITING_USER:
        pausing.resolve_by_message(conversation, message)
    else:
        turns.begin_turn(conversation)
    return message


@transaction.atomic
def retry_turn(*, user, conversation_id: int) -> None:
    """Run the agent again after a failed turn."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.agent_state != AgentState.ERROR:
        raise NothingToRetry
    limits.check_turn_slot(user=user, conversation=conversation)
    turns.begin_turn(conversation, retrying=True)


@transaction.atomic
def stop_turn(*, user, conversation_id: int) -> None:
    """Stop the running turn, keeping what the agent wrote so far."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if not conversation.is_running:
        raise NothingToStop
    turns.stop_turn(conversation)


def _clean_title(title: str) -> str:
    return clean_text(title)[:TITLE_MAX_CHARS]


def _auto_title(text: str) -> str:
    title = " ".join(text.split())
    if len(title) > AUTO_TITLE_CHARS:
        title = title[: AUTO_TITLE_CHARS - 1].rstrip() + "…"
    return title
