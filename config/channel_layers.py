"""The channel layers on Redis (config/settings.py): channels-redis's, with bounds.

The queue layer (the turns sent to workers): channels-redis opens Redis connections as a burst
needs them and keeps every one: 500 websockets closing at once (each leaving its groups) left
about 500 idle Redis connections open for good. Here each event loop's pool holds at most
`max_connections`; a burst beyond it waits for a free connection (up to `pool_timeout`
seconds) instead of opening more.

The events layer (every open page and stream): channels-redis's pub/sub layer, whose
channels (one for each socket) hold what they are sent in an Inbox instead of an
asyncio.Queue: bounded, and a fraction of the memory an idle socket keeps.
"""

import asyncio
import collections
import logging
import uuid

from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
from channels_redis.utils import _wrap_close
from redis import asyncio as aioredis
from redis.connection import parse_url

logger = logging.getLogger("parley.events")


class BoundedRedisChannelLayer(RedisChannelLayer):
    def __init__(self, *args, max_connections: int = 20, pool_timeout: float = 20, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self.receiver_id = uuid.uuid4().hex

    def _backup_channel_name(self, channel: str) -> str:
        """The queue of the messages this layer's receives on `channel` took and has not yet
        cleared. channels-redis keeps one per channel, shared by every process that reads it,
        and each receive first puts back into the channel all that the queue holds: a worker
        starting a receive put back a turn another worker had just taken, which was then
        handed out again (django/channels_redis#163; under 30 concurrent flows, 48 claims
        that found their turn taken for 244 turns). Here each layer (a process's) has its
        own: what a process held when it died stays there, lost as a message to a dead
        process is, and the sweep sends that turn again once its lease lapses."""
        return f"{super()._backup_channel_name(channel)}:{self.receiver_id}"

    def create_pool(self, index):
        host = dict(self.hosts[index])
        if "address" not in host:  # Sentinel and the like: as channels-redis makes them
            return super().create_pool(index)
        return aioredis.BlockingConnectionPool.from_url(
            host.pop("address"),
            max_connections=self.max_connections,
            timeout=self.pool_timeout,
            **host,
        )


def events_prefix(redis_url: str) -> str:
    """The names of the events layer's pub/sub channels start with this. Pub/sub channels are
    the whole Redis server's, whatever the database a client selected: naming the database of
    REDIS_URL keeps sites that share a Redis apart, as the queues of the default layer are."""
    return f"asgi.db{parse_url(redis_url).get('db', 0)}."


class Inbox:
    """A channel's messages until its consumer takes them, for the one task that receives on
    it (a consumer's): the part of asyncio.Queue used here. An asyncio.Queue keeps four deques
    from the start (~1.5 KB, for each idle socket); this keeps nothing while empty. Past
    `capacity` unread messages, new ones are dropped, as the queue layer drops them for a
    full channel: events are hints that the next change or a re-check catches up on."""

    __slots__ = ("capacity", "dropping", "messages", "waiter")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.messages: collections.deque | None = None
        self.waiter: asyncio.Future | None = None
        self.dropping = False

    def put_nowait(self, message) -> None:
        if self.messages is None:
            self.messages = collections.deque()
        if len(self.messages) >= self.capacity:
            if not self.dropping:  # once each time it fills up
                logger.info("a channel of the events layer is full: dropping new messages")
            self.dropping = True
            return
        self.dropping = False
        self.messages.append(message)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def get(self):
        # The message stays here until taken: a receive cancelled as it woke loses nothing.
        while not self.messages:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        message = self.messages.popleft()
        if not self.messages:
            self.messages = None
        return message


class EventsLoopLayer(RedisPubSubLoopLayer):
    def __init__(self, *args, capacity: int = 100, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.capacity = capacity

    async def _subscribe_to_channel(self, channel):
        self.channels[channel] = Inbox(self.capacity)
        await self._get_shard(channel).subscribe(channel)


class EventsChannelLayer(RedisPubSubChannelLayer):
    """channels-redis's pub/sub layer with Inbox channels (`capacity`: unread messages
    kept for one channel)."""

    def _get_layer(self):
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:  # as channels-redis makes its loop layer
            layer = self._layers[loop] = EventsLoopLayer(
                *self._args, **self._kwargs, channel_layer=self
            )
            _wrap_close(self, loop)
        return layer
