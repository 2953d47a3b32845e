"""The PostgreSQL pool's check (config/database.py): a connection in use a moment ago, that the
server has said nothing on since, is handed out without a round trip; any other is checked,
and replaced if the server ended it."""

import socket
import time

import psycopg
import pytest
from django.db import connection

from config import database

# Also run on PostgreSQL (make test): PostgreSQL's connection pool.
pytestmark = pytest.mark.postgres


class FakeConnection:
    """What the check uses of a connection: its socket, and its round trip. `server` is the
    server's end of the socket."""

    autocommit = True

    def __init__(self) -> None:
        self.client, self.server = socket.socketpair()
        self.closed = False
        self.ended = False
        self.round_trips = 0

    def fileno(self) -> int:
        return self.client.fileno()

    def execute(self, query: str) -> None:
        self.round_trips += 1
        if self.ended:
            raise psycopg.OperationalError("the server closed the connection")

    def end(self) -> None:
        """The server ends the connection: its reason, then the close."""
        self.server.sendall(b"E FATAL: terminating connection due to administrator command")
        self.server.close()
        self.ended = True


@pytest.fixture
def conn():
    conn = FakeConnection()
    yield conn
    conn.client.close()
    conn.server.close()


def test_a_new_connection_is_checked_and_one_in_use_a_moment_ago_is_not(conn):
    database.check_unless_fresh(conn)  # new to the pool's hands
    assert conn.round_trips == 1
    database.check_unless_fresh(conn)  # handed out again at once
    assert conn.round_trips == 1


def test_a_connection_idle_for_a_while_is_checked(conn, monkeypatch):
    database.check_unless_fresh(conn)
    later = time.monotonic() + database.FRESH_SECONDS + 0.1
    monkeypatch.setattr(database.time, "monotonic", lambda: later)
    database.check_unless_fresh(conn)
    assert conn.round_trips == 2


def test_a_connection_the_server_ended_a_moment_after_its_use_is_checked(conn):
    database.check_unless_fresh(conn)
    conn.end()
    with pytest.raises(psycopg.OperationalError):  # the pool then replaces it
        database.check_unless_fresh(conn)
    assert conn.round_trips == 2


def end_every_pooled_connection() -> set[int]:
    """Terminate the server side of every other connection to the test database, and wait
    until those backends are gone; their pids."""
    params = connection.get_connection_params()
    with psycopg.connect(
        **{k: v for k, v in params.items() if k not in ("cursor_factory", "context")},
        autocommit=True,
    ) as admin:
        others = "datname = current_database() AND pid <> pg_backend_pid()"
        ended = {
            pid
            for _, pid in admin.execute(
                f"SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity WHERE {others}"  # noqa: S608
            ).fetchall()
        }
        deadline = time.monotonic() + 10
        while admin.execute(
            f"SELECT count(*) FROM pg_stat_activity WHERE {others} AND pid = ANY(%s)",  # noqa: S608
            (list(ended),),
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the terminated backends did not exit"
            time.sleep(0.02)
    return ended


@pytest.mark.django_db(transaction=True)
def test_connections_the_server_ended_are_replaced_even_just_after_their_use():
    """The settings' pool, on PostgreSQL: the server ends every pooled connection (a restart,
    an administrator) a moment after each was in use, and every query after it gets a
    connection that works, with no wait for FRESH_SECONDS."""
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    for _ in range(3):  # each connection of the pool (first in, first out) is handed out
        connection.ensure_connection()
        connection.close()
    ended = end_every_pooled_connection()
    assert ended
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        assert pid not in ended
        connection.close()
