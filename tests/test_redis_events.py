"""The events layer on Redis pub/sub (settings.CHANNEL_LAYERS["events"]): sites that share a
Redis under different databases get only their own events, as with their queues."""

import asyncio
import os

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer

from config.channel_layers import events_prefix

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")


def events_layer(url: str) -> RedisPubSubChannelLayer:
    """The events layer as config/settings.py makes it for REDIS_URL=url."""
    return RedisPubSubChannelLayer(hosts=[{"address": url}], prefix=events_prefix(url))


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
