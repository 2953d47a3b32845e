"""The queue layer on Redis (settings.CHANNEL_LAYERS["default"]), which carries the turns to
the workers: a turn one worker took is never handed to another."""

import asyncio
import os
import uuid

from config.channel_layers import BoundedRedisChannelLayer

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")


async def test_a_message_one_worker_took_is_not_handed_to_another():
    first, second = (BoundedRedisChannelLayer(hosts=[{"address": f"{REDIS}/5"}]) for _ in "12")
    channel = f"parley-runs-test-{uuid.uuid4().hex[:8]}"
    try:
        await first.send(channel, {"type": "run.turn", "conversation_id": 7})
        # The first worker takes the turn; the moment before it clears it from its in-flight
        # queue (a task of its own, channels_redis's receive_single), the second starts a
        # receive, which puts back what the in-flight queue holds.
        key = first.prefix + channel
        assert await first._brpop_with_clean(0, key, timeout=1) is not None
        received = asyncio.create_task(second.receive(channel))
        done, _ = await asyncio.wait([received], timeout=1.5)
        assert not done, f"handed out twice: {received.result()}"
        received.cancel()
    finally:
        for layer in (first, second):
            await layer.flush()
