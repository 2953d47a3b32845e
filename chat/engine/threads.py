"""Where a turn's database work runs.

A serving process's runner gives its turns threads of their own, kept from one turn to the
next with their database connections: the one thread Channels gives every socket's reads
(thread-sensitive `database_sync_to_async`) would otherwise run a turn's writes and every
open page's renders one after another, and a new thread per turn would connect anew each
time. Without a runner (the in-process tests, the management commands) turns run their
database work where Channels would, so a test's transaction is the turn's too.
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from channels.db import database_sync_to_async

# Threads a process's turns share; more turns than threads wait for a free one, so the
# database pool (DB_POOL_SIZE) and SQLite's one writer are not outnumbered by threads.
TURN_THREADS = 4

_executor: ThreadPoolExecutor | None = None


def start() -> None:
    """Give this process's turns their own threads (the runner, once per process)."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(TURN_THREADS, thread_name_prefix="parley-turn")


def db(function: Callable) -> Callable:
    """`function` as a coroutine function run on a turn thread, closing stale connections
    around it as Channels does."""
    if _executor is None:
        return database_sync_to_async(function)
    return database_sync_to_async(function, thread_sensitive=False, executor=_executor)
