"""Requests and turns run on threads kept from one to the next (config.threads), each with
its database connection, without ever waiting for another's."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections

from config.threads import ThreadCache

here = sync_to_async(threading.get_ident)


async def test_a_finished_blocks_thread_runs_the_next_one():
    cache = ThreadCache(keep=1)
    async with cache.context():
        first = await here()
    async with cache.context():
        second = await here()
    assert first == second != threading.get_ident()


async def test_blocks_at_once_each_get_a_thread_of_their_own():
    """An event stream holds its request's thread for long: another request is not kept
    waiting for it."""
    cache = ThreadCache(keep=2)
    release = threading.Event()

    async def held() -> int:
        async with cache.context():
            return await sync_to_async(lambda: release.wait(5) and threading.get_ident())()

    long = asyncio.create_task(held())
    await asyncio.sleep(0.05)
    async with cache.context():
        other = await asyncio.wait_for(here(), timeout=1)
    release.set()
    assert other != await long


async def test_a_thread_still_running_when_its_block_ends_is_not_kept():
    """A cancelled request's view runs on to its end: the next request does not queue
    behind it."""
    cache = ThreadCache(keep=2)
    release = threading.Event()
    async with cache.context():
        running = asyncio.ensure_future(sync_to_async(release.wait)(5))
        await asyncio.sleep(0.05)
        running.cancel()
    assert cache.idle == []
    release.set()


async def test_no_more_than_keep_idle_threads_are_kept():
    cache = ThreadCache(keep=2)
    release = asyncio.Event()

    async def block() -> None:
        async with cache.context():
            await here()
            await release.wait()

    blocks = [asyncio.create_task(block()) for _ in range(4)]
    await asyncio.sleep(0.05)
    release.set()
    await asyncio.gather(*blocks)
    assert len(cache.idle) == 2


@pytest.mark.django_db(transaction=True)
async def test_requests_reuse_a_kept_thread_and_its_database_connection(user, monkeypatch):
    """On SQLite a new thread connected anew, opening the file and running its PRAGMAs, for
    every request (Django's ASGI handler gives each request a new thread)."""
    from django.core.handlers.base import BaseHandler
    from django.db.backends.signals import connection_created
    from django.test import Client

    from tests.test_middleware import get

    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    threads: list[threading.Thread] = []
    handle = BaseHandler.get_response

    def recorded(self, request):
        threads.append(threading.current_thread())  # kept: a new thread may reuse an id
        return handle(self, request)

    monkeypatch.setattr(BaseHandler, "get_response", recorded)
    connects: list[object] = []

    def connected(sender, connection, **kwargs):
        connects.append(connection)

    connection_created.connect(connected)
    try:
        for _ in range(3):
            status, _, body = await get("/", headers=[(b"cookie", cookie.encode())])
            assert status == 200 and b"First chat" not in body
    finally:
        connection_created.disconnect(connected)
    assert len(set(threads)) == 1
    if connection.vendor == "sqlite":  # PostgreSQL's pool lends a connection per request
        assert len(connects) <= 1


@pytest.mark.django_db(transaction=True)
async def test_a_slow_sweep_job_holds_up_neither_sockets_nor_pushes(monkeypatch):
    """A webhook delivery may wait on a slow endpoint for up to WEBHOOK_TIMEOUT: meanwhile a
    socket's session read (the process's shared sync thread) and a push (its push thread)
    still run at once."""
    from channels.db import database_sync_to_async

    from chat import consumers, runner

    release = threading.Event()
    monkeypatch.setattr(runner, "_jobs", [lambda: release.wait(5)])
    jobs = asyncio.create_task(runner.run_jobs_once())
    await asyncio.sleep(0.05)
    try:
        await asyncio.wait_for(database_sync_to_async(lambda: None)(), timeout=1)
        await asyncio.wait_for(consumers.on_push_thread(lambda: None)(), timeout=1)
        assert not jobs.done()
    finally:
        release.set()
        await jobs


async def test_a_block_that_lets_go_of_its_thread_early_hands_it_to_the_next():
    """An event stream's request gives its thread back once its view has returned: the next
    request runs there while the stream is still open, and the stream's later sync calls
    run elsewhere."""
    cache = ThreadCache(keep=2)
    async with cache.context() as stream:
        held = await here()
        await stream.end()
        await stream.end()  # once is enough; the block's own end does nothing more
        async with cache.context():
            assert await here() == held  # the next block got it
        assert await here() != held
    assert [t for t in cache.idle if t is stream.thread] == [stream.thread]


@pytest.mark.django_db(transaction=True)
async def test_a_thread_that_is_not_kept_closes_its_database_connection():
    """Not left to the collector: a connection refers to itself, and waited for its next full
    pass with SQLite's page cache (a burst of event streams' requests left ~280 KB each)."""
    cache = ThreadCache(keep=0)

    def connect():
        this_threads = connections["default"]
        this_threads.ensure_connection()
        return this_threads

    async with cache.context() as block:
        used = await sync_to_async(connect)()
        assert used.connection is not None
    await asyncio.to_thread(block.thread.shutdown, wait=True)
    assert used.connection is None
