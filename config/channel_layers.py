"""channels-redis's layer with a bounded connection pool.

channels-redis opens Redis connections as a burst needs them and keeps every one: 500
websockets closing at once (each leaving its groups) left about 500 idle Redis connections
open for good. Here each event loop's pool holds at most `max_connections`; a burst beyond it
waits for a free connection (up to `pool_timeout` seconds) instead of opening more.
"""

from channels_redis.core import RedisChannelLayer
from redis import asyncio as aioredis
from redis.connection import parse_url


class BoundedRedisChannelLayer(RedisChannelLayer):
    def __init__(self, *args, max_connections: int = 20, pool_timeout: float = 20, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout

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
