"""Idle connections: memory per idle websocket and per idle server-sent event stream, and
whether memory and Redis connections are given back when they close.

A web process with the Redis channel layer (SQLite) for each kind of connection. COUNT
connections are opened on one conversation and left idle; the process's resident memory
(VmRSS) and the Redis connections of the benchmark's Redis database are read before, while
open, after they closed, and after a second burst (memory the allocator kept is reused, not
grown again).

The websockets are a browser's: they offer permessage-deflate, and the conversation has a
short exchange, so each socket's sync has its answer (the transcript) and the socket keeps
the compressor that sent it and the decompressor of its sync. The same is measured without
the offer ("websocket_plain"), for what compression costs.
"""

import asyncio
import contextlib
import functools
from pathlib import Path

import httpx
import redis

from bench.client import Person
from bench.model import reply_text
from bench.servers import REDIS_DB, flush_redis, parley

COUNT = 150
EXCHANGE_CHARS = 1_000  # the reply that each socket's sync sends, with its question
SETTLE_SECONDS = 2.0


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def redis_connections(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return sum(1 for c in client.client_list() if int(c.get("db", -1)) == REDIS_DB) - 1
    finally:
        client.close()


async def open_sockets(person: Person, conversation: int, count: int, deflate: bool) -> list:
    """`count` tabs, each open once it has the answer to its sync."""
    tabs = []
    for _ in range(count):
        tab = await person.socket(conversation, deflate=deflate)
        tabs.append(tab)
        assert bool(tab.socket.extensions) == deflate, tab.socket.extensions
        await tab.wait_for(lambda message: True)
    return tabs


async def open_streams(person: Person, conversation: int, count: int) -> list:
    client = httpx.AsyncClient(
        base_url=person.url,
        cookies={"sessionid": person.session},
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
        timeout=httpx.Timeout(60, read=None),  # an idle stream sends a keepalive only
    )
    opened = asyncio.Queue()

    async def stream() -> None:
        url = f"/api/v1/conversations/{conversation}/events"
        async with client.stream("GET", url) as response:
            response.raise_for_status()
            async for _ in response.aiter_lines():
                await opened.put(1)
                await asyncio.sleep(3600)

    tasks = [asyncio.create_task(stream()) for _ in range(count)]
    for _ in range(count):
        await asyncio.wait_for(opened.get(), 60)
    return [client, tasks]


async def close_streams(opened: list) -> None:
    client, tasks = opened
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
    await client.aclose()


# Run in the server's environment (manage.py shell): a conversation of a question and a reply.
EXCHANGE = """
from django.contrib.auth.models import User
from django.db import transaction
from chat import services
from chat.blocks import TextBlock
from chat.models import Role
from chat.transcript import Transcript, lock
conversation = services.create_conversation(owner=User.objects.get(username="demo"))
with transaction.atomic(), Transcript(lock(conversation.pk)) as edit:
    edit.append(role=Role.USER, blocks=[TextBlock(text="A question?")])
    edit.append(role=Role.ASSISTANT, blocks=[TextBlock(text={reply!r})])
print(conversation.pk)
"""


async def measure(server, redis_url: str, kind: str) -> dict:
    pid = server.process.pid
    person = Person(server.url)
    await person.log_in()
    if kind == "sse":
        conversation = await person.new_conversation()
        opener = open_streams
    else:
        reply = reply_text(EXCHANGE_CHARS)
        conversation = int(server.manage("shell", "-v", "0", "-c", EXCHANGE.format(reply=reply)))
        opener = functools.partial(open_sockets, deflate=kind == "websocket")

    async def burst() -> tuple[int, int]:
        opened = await opener(person, conversation, COUNT)
        await asyncio.sleep(SETTLE_SECONDS)
        during = (rss_kb(pid), redis_connections(redis_url))
        if kind != "sse":
            assert all(tab.socket.close_code is None for tab in opened), "a socket closed"
            for tab in opened:
                await tab.close()
        else:
            await close_streams(opened)
        return during

    warm = await opener(person, conversation, 10)  # imports, pools, templates
    if kind != "sse":
        for tab in warm:
            await tab.close()
    else:
        await close_streams(warm)
    await asyncio.sleep(SETTLE_SECONDS)
    before = (rss_kb(pid), redis_connections(redis_url))
    during = await burst()
    await asyncio.sleep(SETTLE_SECONDS)
    after = (rss_kb(pid), redis_connections(redis_url))
    second = await burst()
    await asyncio.sleep(SETTLE_SECONDS)
    final = (rss_kb(pid), redis_connections(redis_url))
    await person.close()
    return {
        "count": COUNT,
        "kb_each": round((during[0] - before[0]) / COUNT, 1),
        "rss_kb": {"before": before[0], "open": during[0], "closed": after[0]},
        "rss_kb_second_burst": {"open": second[0], "closed": final[0]},
        "redis_connections": {"before": before[1], "open": during[1], "closed": after[1]},
        "redis_connections_after_second_burst": final[1],
    }


def run(model_url: str) -> dict:
    redis_url = f"redis://127.0.0.1:6379/{REDIS_DB}"
    flush_redis(redis_url)
    results = {}
    for kind in ("websocket", "websocket_plain", "sse"):
        # A process of its own for each: memory another kind freed would be reused.
        with parley(
            model_url, REDIS_URL=redis_url, PARLEY_MAX_STREAMS="0", PARLEY_MAX_SOCKETS="0"
        ) as [server]:
            results[kind] = asyncio.run(measure(server, redis_url, kind))
        flush_redis(redis_url)
    return results


if __name__ == "__main__":
    from bench.model import Model

    print(run(Model().url))
