"""The PostgreSQL connection pool's health check (config/settings.py), without a round trip
for a connection that was just in use.

psycopg_pool's `check` runs before a connection is handed out. ConnectionPool.check_connection
makes a round trip to the server each time: for every request, every turn step and every
websocket push, since each borrows a connection and gives it back. On a busy 2-core machine
that round trip waits for the PostgreSQL backend to be scheduled; it was an eighth of the web
processes' busy time under 30 concurrent flows.

Here a connection handed out less than FRESH_SECONDS ago, and given back since (the pool
discards one it finds closed as it comes back), is handed out again without the round trip.
Any other (new, or idle for longer, as every connection is across a server restart) is
checked as before, and replaced if the server ended it. What this gives up: a connection the
server ends within FRESH_SECONDS of its last use (an administrator's pg_terminate_backend)
fails the one request that borrows it next, as it would have failed the request using it a
moment earlier. (Noting the time as a connection comes back, with the pool's `reset`, would
make the pool hand every return to a worker thread of its own.)
"""

import time
import weakref

import psycopg
from psycopg_pool import ConnectionPool

FRESH_SECONDS = 1.0

# Connection -> time.monotonic() of when the pool last handed it out.
_handed_out: weakref.WeakKeyDictionary[psycopg.Connection, float] = weakref.WeakKeyDictionary()


def check_unless_fresh(connection: psycopg.Connection) -> None:
    """The pool's `check`: ConnectionPool.check_connection (raises if the connection no longer
    works), unless the pool handed the connection out within the last FRESH_SECONDS."""
    now = time.monotonic()
    if now - _handed_out.get(connection, float("-inf")) >= FRESH_SECONDS:
        ConnectionPool.check_connection(connection)
    _handed_out[connection] = now
