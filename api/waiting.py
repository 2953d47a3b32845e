"""Waiting, without holding a thread, until a conversation's turn completes or pauses."""

import time

from channels.db import database_sync_to_async

from chat.events import conversation_group, subscribe
from chat.models import RUNNING_STATES, Conversation


def _state(conversation_id: int) -> str | None:
    return (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("agent_state", flat=True)
        .first()
    )


async def wait_until_settled(conversation_id: int, seconds: float) -> None:
    """Return when the turn is no longer running, after `seconds`, or when this process
    begins to shut down (the caller then answers with the turn still running)."""
    if seconds <= 0:
        return
    deadline = time.monotonic() + seconds
    async with subscribe(conversation_group(conversation_id)) as changes:
        while True:
            state = await database_sync_to_async(_state)(conversation_id)
            remaining = deadline - time.monotonic()
            if state is None or state not in RUNNING_STATES or remaining <= 0 or changes.closed:
                return
            # Any change to the conversation wakes us; re-check at least every second.
            await changes.wait(min(remaining, 1.0))
