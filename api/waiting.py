"""Waiting, without holding a thread, until a conversation's turn completes or pauses."""

import asyncio
import contextlib
import time

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from chat.events import conversation_group
from chat.models import RUNNING_STATES, Conversation


async def wait_until_settled(conversation_id: int, seconds: float) -> None:
    """Return when the turn is no longer running, or after `seconds`."""
    if seconds <= 0:
        return
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = conversation_group(conversation_id)
    await layer.group_add(group, channel)
    deadline = time.monotonic() + seconds
    try:
        while True:
            state = await database_sync_to_async(
                lambda: (
                    Conversation.objects.filter(pk=conversation_id)
                    .values_list("agent_state", flat=True)
                    .first()
                )
            )()
            remaining = deadline - time.monotonic()
            if state is None or state not in RUNNING_STATES or remaining <= 0:
                return
            # Any change to the conversation wakes us; re-check at least every second.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(layer.receive(channel), min(remaining, 1.0))
    finally:
        await layer.group_discard(group, channel)
