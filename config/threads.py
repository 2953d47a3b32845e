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
busy a new one is made: a block that holds its thread for long (an event stream, a `wait`,
a slow webhook) never makes another wait for it. At most KEEP idle threads are kept; a
thread that is still running something when its block ends (a cancelled request's view
finishing) is not kept.
"""

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager

from asgiref.sync import ThreadSensitiveContext

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

    @asynccontextmanager
    async def context(self):
        """A ThreadSensitiveContext on a kept thread (or a new one): the sync calls made in
        the block run there, one at a time."""
        thread = self.idle.pop() if self.idle else _Thread()
        try:
            async with ThreadSensitiveContext(executor=thread):
                yield
        finally:
            if thread.idle and len(self.idle) < self.keep:
                self.idle.append(thread)
            else:
                thread.shutdown(wait=False)


sync_threads = ThreadCache()
