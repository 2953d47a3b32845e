"""The events layer on Redis pub/sub (settings.CHANNEL_LAYERS["events"]): sites that share a
Redis under different databases get only their own events, as with their queues; a channel
keeps what it is sent, in order, up to its capacity."""

import asyncio
import logging
import os

import pytest

from config.channel_layers import EventsChannelLayer, Inbox, events_prefix

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")


def events_layer(url: str, capacity: int = 1000) -> EventsChannelLayer:
    """The events layer as config/settings.py makes it for REDIS_URL=url."""
    return EventsChannelLayer(
        hosts=[{"address": url}], prefix=events_prefix(url), capacity=capacity
    )


async def test_sites_on_one_redis_get_only_their_own_events():
    site, same_site, other_site = (events_layer(f"{REDIS}/{db}") for db in (3, 3, 4))
    try:
        listening = []
        for layer in (site, other_site):
            channel = await layer.new_channel()
            await layer.group_add("conversation.5", channel)
            listening.append((layer, channel))
        await asyncio.sleep(0.2)  # Redis has taken both subscriptions
        await same_site.group_send("conversation.5", {"type": "chat.changed", "seq": 7})

        (layer, channel), (other, other_channel) = listening
        assert await asyncio.wait_for(layer.receive(channel), 5) == {
            "type": "chat.changed",
            "seq": 7,
        }
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(other.receive(other_channel), 0.5)
    finally:
        for layer in (site, same_site, other_site):
            await layer.flush()


def test_the_database_of_the_url_names_the_channels():
    assert events_prefix("redis://127.0.0.1:6379/3") != events_prefix("redis://127.0.0.1:6379/4")
    assert events_prefix("redis://127.0.0.1:6379") == events_prefix("redis://127.0.0.1:6379/0")
    assert events_prefix("unix:///run/redis.sock?db=2") == events_prefix("redis://h:1/2")


async def test_a_channel_keeps_its_messages_in_order_up_to_its_capacity(caplog):
    caplog.set_level(logging.INFO, logger="parley.events")
    layer = events_layer(f"{REDIS}/3", capacity=3)
    try:
        channel = await layer.new_channel()
        await layer.group_add("conversation.9", channel)
        await asyncio.sleep(0.2)
        for seq in range(5):
            await layer.group_send("conversation.9", {"type": "chat.changed", "seq": seq})
        await asyncio.sleep(0.3)  # all five arrived; the last two found the channel full
        received = [(await asyncio.wait_for(layer.receive(channel), 5))["seq"] for _ in range(3)]
        assert received == [0, 1, 2]
        full = [r for r in caplog.records if "is full" in r.getMessage()]
        assert len(full) == 1  # once for the two it dropped
        await layer.group_send("conversation.9", {"type": "chat.changed", "seq": 5})
        assert (await asyncio.wait_for(layer.receive(channel), 5))["seq"] == 5
    finally:
        await layer.flush()


async def test_a_receive_cancelled_as_its_message_arrives_loses_nothing():
    inbox = Inbox(capacity=10)
    waiting = asyncio.create_task(inbox.get())
    await asyncio.sleep(0)
    inbox.put_nowait("first")
    waiting.cancel()  # woken, but cancelled before it ran again
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await inbox.get() == "first"
    assert inbox.messages is None  # nothing kept while empty
