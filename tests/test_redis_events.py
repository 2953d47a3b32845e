"""The events layer on Redis pub/sub (settings.CHANNEL_LAYERS["events"]) as config/settings.py
makes it for a REDIS_URL: sites that share a Redis under different databases get only their
own events, as with their queues; a channel gets what it is sent, in order. And the Redis read
timeout of both layers outlasts the queue's blocking receive."""

import asyncio
import os
import runpy

import pytest
import redis
from channels_redis.core import RedisChannelLayer
from django.utils.module_loading import import_string

from tests.live_clients import eventually
from tests.live_server import ROOT

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")


def layers_config(url: str) -> dict:
    """settings.CHANNEL_LAYERS as config/settings.py makes it with REDIS_URL=url (settings
    are read from the environment at import: run that module again)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REDIS_URL", url)
        return runpy.run_path(str(ROOT / "config/settings.py"))["CHANNEL_LAYERS"]


def events_config(url: str) -> dict:
    """settings.CHANNEL_LAYERS["events"] with REDIS_URL=url."""
    return layers_config(url)["events"]


def events_layer(url: str):
    config = events_config(url)
    return import_string(config["BACKEND"])(**config["CONFIG"])


async def subscribed(*listening: tuple) -> None:
    """Wait until Redis has taken the subscription of each (layer, group): the layer sends
    SUBSCRIBE without waiting for its reply, and a message published before Redis took it is
    not delivered."""
    names = [layer._get_layer()._get_group_channel_name(group) for layer, group in listening]
    with redis.Redis.from_url(REDIS) as client:
        await eventually(
            lambda: all(count for _, count in client.pubsub_numsub(*names)),
            5,
            "Redis to take the subscriptions",
        )


async def test_sites_on_one_redis_get_only_their_own_events():
    site, same_site, other_site = (events_layer(f"{REDIS}/{db}") for db in (3, 3, 4))
    try:
        listening = []
        for layer in (site, other_site):
            channel = await layer.new_channel()
            await layer.group_add("conversation.5", channel)
            listening.append((layer, channel))
        await subscribed((site, "conversation.5"), (other_site, "conversation.5"))
        await same_site.group_send("conversation.5", {"type": "chat.changed", "seq": 7})

        (layer, channel), (other, other_channel) = listening
        assert await asyncio.wait_for(layer.receive(channel), 5) == {
            "type": "chat.changed",
            "seq": 7,
        }
        # The other site's own event, published after that one: Redis delivers in the order
        # it published, so had the other site got the first, it would come before this one.
        await other.group_send("conversation.5", {"type": "chat.changed", "seq": 8})
        assert await asyncio.wait_for(other.receive(other_channel), 5) == {
            "type": "chat.changed",
            "seq": 8,
        }
    finally:
        for layer in (site, same_site, other_site):
            await layer.flush()


def test_the_database_of_the_url_names_the_channels():
    def prefix(url: str) -> str:
        return events_config(url)["CONFIG"]["prefix"]

    assert prefix("redis://127.0.0.1:6379/3") != prefix("redis://127.0.0.1:6379/4")
    assert prefix("redis://127.0.0.1:6379") == prefix("redis://127.0.0.1:6379/0")
    assert prefix("unix:///run/redis.sock?db=2") == prefix("redis://h:1/2")


async def test_a_channel_gets_its_messages_in_order():
    layer = events_layer(f"{REDIS}/3")
    try:
        channel = await layer.new_channel()
        await layer.group_add("conversation.9", channel)
        await subscribed((layer, "conversation.9"))
        for seq in range(5):
            await layer.group_send("conversation.9", {"type": "chat.changed", "seq": seq})
        received = [(await asyncio.wait_for(layer.receive(channel), 5))["seq"] for _ in range(5)]
        assert received == [0, 1, 2, 3, 4]
    finally:
        await layer.flush()


def test_the_redis_read_timeout_outlasts_the_queues_blocking_receive():
    """An idle worker's receive is a blocking read that Redis answers after brpop_timeout
    even when nothing came: a read timeout no longer than that failed every one (redis-py 8's
    5 s default: the worker exited, websockets closed with 1011). tests/test_redis_idle.py
    idles real processes past a shorter one set through REDIS_URL."""
    for layer in layers_config(REDIS).values():
        [host] = layer["CONFIG"]["hosts"]
        assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
