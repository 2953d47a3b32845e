"""The threads that requests, turns and sweep jobs run their sync code on, kept from one to
the next.

Django's ASGI handler gives every request a thread of its own (a ThreadSensitiveContext),
chat.runtime every turn, and chat.runner each round of the sweep's jobs. Each was a new
thread, so each connected to the database anew: on SQLite it opened the file and ran the
connection's PRAGMAs (~1.7 ms, measured inside an answer's request on a 2-core machine) and
left the connection for the garbage collector to close; on PostgreSQL it borrowed from the
pool, as it still does. Here a finished block's thread waits for the next one, with its
connection (CONN_MAX_AGE still applies, and Django's request signals still check it). Each
thread runs one request, turn or round at a time, as before, and when every kept thread is
busy a new one is made: a block that holds its thread for long (a `wait`, a slow webhook)
never makes another wait for it. An event stream's request lets go of its thread once its
view has returned (Block.end), so an open stream holds none. At most KEEP idle threads are kept; a
thread that is still running something when its block ends (a cancelled request's view
finishing) is not kept.
"""

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.db import connections

KEEP = 8


class _Thread(ThreadPoolExecutor):
    """One thread, which knows whether it is running anything."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="parley-sync")
        self.lock = threading.Lock()
        self.pending = 0

    def submit(self, fn, /, *args, **kwargs) -> Future:
        with self.lock:
            self.pending += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future) -> None:
        with self.lock:
            self.pending -= 1

    @property
    def idle(self) -> bool:
        with self.lock:
            return self.pending == 0


class ThreadCache:
    """Idle threads for ThreadSensitiveContexts (used from one event loop)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self.idle: list[_Thread] = []

    def context(self) -> "Block":
        """A ThreadSensitiveContext on a kept thread (or a new one), to use with `async with`:
        the sync calls made in the block run there, one at a time. The Block may let go of
        the thread before the block ends."""
        return Block(self)

    def put_back(self, thread: _Thread) -> None:
        if thread.idle and len(self.idle) < self.keep:
            self.idle.append(thread)
        else:
            # Its database connections close with it, after what it still runs: a connection
            # refers to itself (its `ops`, ...), so left alone it waited for the collector's
            # next full pass, with SQLite's page cache (after a burst of 100 event streams'
            # requests, ~280 KB a stream of the process's memory).
            thread.submit(connections.close_all)
            thread.shutdown(wait=False)


class Block:
    """A block's hold on its thread (ThreadCache.context)."""

    def __init__(self, cache: ThreadCache) -> None:
        self.cache = cache
        self.ended = False

    async def __aenter__(self) -> "Block":
        self.thread = self.cache.idle.pop() if self.cache.idle else _Thread()
        self.context = ThreadSensitiveContext(executor=self.thread)
        await self.context.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.end()

    async def end(self) -> None:
        """Let go of the thread now, before the block's end (from the task that entered
        it): the thread serves the next block, and the sync calls this block makes from
        here on run where asgiref sends calls made outside any block. An event stream's
        request does this once its view has returned (config.handlers)."""
        if self.ended:
            return
        self.ended = True
        await self.context.__aexit__(None, None, None)
        self.cache.put_back(self.thread)


sync_threads = ThreadCache()
