"""The agent runtime: drives one turn of a conversation and persists every step.

State lives in the database (chat.models.AgentState); this module holds no state of its own,
so a turn's progress is visible to every process and page at every step.
"""

import logging
import time

from channels.db import database_sync_to_async

from chat import selectors, services
from chat.blocks import ErrorBlock, parse_blocks
from chat.errors import ConversationNotFound
from chat.providers import get_provider
from chat.providers.base import HistoryMessage, TextDelta

logger = logging.getLogger("parley.runtime")

# Streamed text is written at most this often (seconds), so fast providers do not write per token.
STREAM_FLUSH_INTERVAL = 0.05


def build_history(conversation_id: int) -> list[HistoryMessage]:
    """The provider's view of the transcript. Error blocks are for people, not the model."""
    history = []
    for message in selectors.messages_changed_since(conversation_id=conversation_id, after=-1):
        blocks = [b for b in parse_blocks(message.blocks) if not isinstance(b, ErrorBlock)]
        if blocks:
            history.append(HistoryMessage(role=message.role, blocks=blocks))
    return history


class _StreamWriter:
    """Accumulates streamed text and writes it in batches."""

    def __init__(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        self.message_id: int | None = None
        self.text = ""
        self.written = ""
        self.last_write = 0.0

    async def add(self, delta: str) -> None:
        self.text += delta
        if time.monotonic() - self.last_write >= STREAM_FLUSH_INTERVAL:
            await self.flush()

    async def flush(self) -> None:
        if self.text == self.written:
            return
        self.message_id = await database_sync_to_async(services.append_assistant_text)(
            conversation_id=self.conversation_id, message_id=self.message_id, text=self.text
        )
        self.written = self.text
        self.last_write = time.monotonic()


async def run_turn(conversation_id: int) -> None:
    """Run the agent's turn to its end. Precondition: the conversation is llm_requesting."""
    writer = _StreamWriter(conversation_id)
    try:
        provider = get_provider()
        history = await database_sync_to_async(build_history)(conversation_id)
        async for event in provider.stream(history=history):
            if isinstance(event, TextDelta):
                await writer.add(event.text)
        await writer.flush()
        await database_sync_to_async(services.finish_turn)(conversation_id=conversation_id)
    except ConversationNotFound:
        logger.info("conversation %s was deleted during its turn", conversation_id)
    except Exception:
        logger.exception("turn of conversation %s failed", conversation_id)
        try:
            await writer.flush()
            await database_sync_to_async(services.fail_turn)(conversation_id=conversation_id)
        except ConversationNotFound:
            pass
