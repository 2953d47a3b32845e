"""The PostgreSQL connection pool's health check (config/settings.py), without a round trip
for a connection that was just in use and has heard nothing from the server since.

psycopg_pool's `check` runs before a connection is handed out. ConnectionPool.check_connection
makes a round trip to the server each time: for every request, every turn step and every
websocket push, since each borrows a connection and gives it back. On a busy 2-core machine
that round trip waits for the PostgreSQL backend to be scheduled; it was an eighth of the web
processes' busy time under 30 concurrent flows.

Here a connection handed out less than FRESH_SECONDS ago, and given back since (the pool
discards one it finds closed as it comes back), is handed out again without the round trip,
if its socket has nothing to read. An idle connection hears from the server only when the
server ends it (a restart, an administrator's pg_terminate_backend, idle_session_timeout): it
sends its reason and closes, and the socket turns readable. Such a connection, and any other
(new, or idle for longer), is checked as before, and replaced if the server ended it; asking
the socket is a poll(2), not a round trip. What this gives up: a connection cut off without a
word (a network partition) within FRESH_SECONDS of its last use fails the request that borrows
it next, as it would have failed the request using it a moment earlier. (Noting the time as a
connection comes back, with the pool's `reset`, would make the pool hand every return to a
worker thread of its own.)
"""

import select
import time
import weakref

import psycopg
from psycopg_pool import ConnectionPool

FRESH_SECONDS = 1.0

# The pool's reconnect_timeout. A connection the pool fails to make is tried again after 1 s,
# then 2, 4, 8 s..., doubling until reconnect_timeout (psycopg_pool's default: 5 minutes) has
# passed: PostgreSQL back after a 40 s outage was tried again 18 s later, after a 70 s one,
# 51 s later (tests/test_database_recovery_live.py). Bounded here, the tries give up after 5 s
# (their pauses never pass 2 s) and the next request or job that finds no connection starts
# them again at once: a process serves again within a second or two of the database.
RECONNECT_SECONDS = 5.0

# Connection -> time.monotonic() of when the pool last handed it out.
_handed_out: weakref.WeakKeyDictionary[psycopg.Connection, float] = weakref.WeakKeyDictionary()


def check_unless_fresh(connection: psycopg.Connection) -> None:
    """The pool's `check`: ConnectionPool.check_connection (raises if the connection no longer
    works), unless the pool handed the connection out within the last FRESH_SECONDS and the
    server has said nothing on it since."""
    now = time.monotonic()
    fresh = now - _handed_out.get(connection, float("-inf")) < FRESH_SECONDS
    if not fresh or server_spoke(connection):
        ConnectionPool.check_connection(connection)
    _handed_out[connection] = now


def server_spoke(connection: psycopg.Connection) -> bool:
    """Whether the idle connection's socket has something to read (or is closed)."""
    if connection.closed:
        return True
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    return bool(poller.poll(0))
