"""Every write to conversations and messages. Views, consumers and the runtime call these.

Each write that changes the transcript bumps the conversation's change cursor (`seq`) under
the conversation's row lock and pushes a `chat.changed` event after commit.
"""

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from chat import events, runner
from chat.blocks import Block, ErrorBlock, TextBlock, dump_blocks
from chat.errors import (
    AgentBusy,
    ConversationNotFound,
    EmptyMessage,
    MessageTooLong,
    NothingToRetry,
)
from chat.models import RUNNING_STATES, AgentState, Conversation, Message, Role
from chat.selectors import conversation_for_user

TITLE_MAX_CHARS = Conversation._meta.get_field("title").max_length
AUTO_TITLE_CHARS = 60

# Stored as English msgids and translated when rendered, so each reader sees their language.
AGENT_FAILED = gettext_noop("The agent could not finish its reply. Nothing was lost; try again.")
AGENT_INTERRUPTED = gettext_noop(
    "The agent was interrupted by a server restart. Nothing was lost; try again."
)


def create_conversation(*, owner, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=owner, title=_clean_title(title))


@transaction.atomic
def rename_conversation(*, user, conversation_id: int, title: str) -> Conversation:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    conversation.title = _clean_title(title)
    _bump(conversation)
    return conversation


@transaction.atomic
def delete_conversation(*, user, conversation_id: int) -> None:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    seq = conversation.seq + 1
    conversation.delete()
    # Open tabs re-read, find nothing, and close their socket.
    events.send_conversation_event_on_commit(
        conversation_id, events.conversation_changed(conversation_id, seq)
    )


@transaction.atomic
def post_user_message(*, user, conversation_id: int, text: str) -> Message:
    """Append the user's message and start the agent's turn.

    Raises EmptyMessage, MessageTooLong, AgentBusy (a turn is running) or ConversationNotFound.
    """
    text = text.strip()
    if not text:
        raise EmptyMessage
    if len(text) > settings.PARLEY_MAX_MESSAGE_CHARS:
        raise MessageTooLong
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.agent_state not in (AgentState.IDLE, AgentState.ERROR):
        raise AgentBusy
    if not conversation.title:
        conversation.title = _auto_title(text)
    message = _append_message(conversation, role=Role.USER, blocks=[TextBlock(text=text)])
    _start_turn(conversation)
    return message


@transaction.atomic
def retry_turn(*, user, conversation_id: int) -> None:
    """Run the agent again after a failed turn."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.agent_state != AgentState.ERROR:
        raise NothingToRetry
    _start_turn(conversation)


# --- Writes made by the agent runtime (no user: the runtime acts for the conversation) -------


@transaction.atomic
def append_assistant_text(*, conversation_id: int, message_id: int | None, text: str) -> int:
    """Create (message_id=None) or update the assistant message of the running turn.

    Returns the message id. Text replaces the message's text: streaming sends the text so far.
    """
    conversation = _lock(conversation_id)
    blocks = [TextBlock(text=text)]
    if message_id is None:
        return _append_message(conversation, role=Role.ASSISTANT, blocks=blocks).pk
    message = conversation.messages.get(pk=message_id)
    message.blocks = dump_blocks(blocks)
    message.version += 1
    message.seq = _bump(conversation)
    message.updated_at = conversation.updated_at
    message.save(update_fields=["blocks", "version", "seq", "updated_at"])
    return message.pk


@transaction.atomic
def finish_turn(*, conversation_id: int) -> None:
    conversation = _lock(conversation_id)
    _set_state(conversation, AgentState.IDLE)


@transaction.atomic
def fail_turn(*, conversation_id: int, message: str = AGENT_FAILED) -> None:
    """End the turn in the error state with a retryable error block."""
    _fail(_lock(conversation_id), message)


def interrupt_running_turns() -> int:
    """Mark every turn left running by a stopped server as failed, so it can be retried.

    Only for a single server process (`make run`), called before it starts serving: no other
    process can be running those turns. Returns how many turns were interrupted.
    """
    running = Conversation.objects.filter(agent_state__in=RUNNING_STATES)
    interrupted = 0
    for conversation_id in running.values_list("pk", flat=True):
        with transaction.atomic():
            conversation = _lock(conversation_id)
            if conversation.is_running:
                _fail(conversation, AGENT_INTERRUPTED)
                interrupted += 1
    return interrupted


# --- Helpers: the caller holds the conversation's row lock --------------------------------------


def _lock(conversation_id: int) -> Conversation:
    try:
        return Conversation.objects.select_for_update(of=("self",)).get(pk=conversation_id)
    except Conversation.DoesNotExist:
        raise ConversationNotFound from None


def _bump(conversation: Conversation) -> int:
    """Advance the change cursor, save the conversation and push the change after commit."""
    conversation.seq += 1
    conversation.updated_at = timezone.now()
    conversation.save(update_fields=["seq", "updated_at", "title", "agent_state"])
    events.send_conversation_event_on_commit(
        conversation.pk, events.conversation_changed(conversation.pk, conversation.seq)
    )
    return conversation.seq


def _append_message(conversation: Conversation, *, role: Role, blocks: list[Block]) -> Message:
    last = conversation.messages.order_by("-order").values_list("order", flat=True).first()
    seq = _bump(conversation)
    return Message.objects.create(
        conversation=conversation,
        role=role,
        order=0 if last is None else last + 1,
        blocks=dump_blocks(blocks),
        created_seq=seq,
        seq=seq,
        created_at=conversation.updated_at,
        updated_at=conversation.updated_at,
    )


def _fail(conversation: Conversation, message: str) -> None:
    _append_message(
        conversation, role=Role.SYSTEM, blocks=[ErrorBlock(message=message, retryable=True)]
    )
    _set_state(conversation, AgentState.ERROR)


def _set_state(conversation: Conversation, state: AgentState) -> None:
    conversation.agent_state = state
    _bump(conversation)


def _start_turn(conversation: Conversation) -> None:
    _set_state(conversation, AgentState.LLM_REQUESTING)
    runner.start_turn_on_commit(conversation.pk)


def _clean_title(title: str) -> str:
    return " ".join(title.split())[:TITLE_MAX_CHARS]


def _auto_title(text: str) -> str:
    title = " ".join(text.split())
    if len(title) > AUTO_TITLE_CHARS:
        title = title[: AUTO_TITLE_CHARS - 1].rstrip() + "…"
    return title
