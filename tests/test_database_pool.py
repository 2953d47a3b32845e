"""The PostgreSQL pool's check (config/database.py): a connection in use a moment ago is
handed out without a round trip; any other is checked, and replaced if the server ended it."""

import time

import psycopg
import pytest
from django.db import connection

from config import database


class FakeConnection:
    """What ConnectionPool.check_connection uses of a connection: its round trip."""

    autocommit = True

    def __init__(self) -> None:
        self.works = True
        self.round_trips = 0

    def execute(self, query: str) -> None:
        self.round_trips += 1
        if not self.works:
            raise psycopg.OperationalError("the server closed the connection")


def test_a_new_connection_is_checked_and_one_in_use_a_moment_ago_is_not():
    conn = FakeConnection()
    database.check_unless_fresh(conn)  # new to the pool's hands
    assert conn.round_trips == 1
    database.check_unless_fresh(conn)  # handed out again at once
    assert conn.round_trips == 1


def test_a_connection_idle_for_a_while_is_checked(monkeypatch):
    conn = FakeConnection()
    database.check_unless_fresh(conn)
    conn.works = False  # the server ended it meanwhile
    later = time.monotonic() + database.FRESH_SECONDS + 0.1
    monkeypatch.setattr(database.time, "monotonic", lambda: later)
    with pytest.raises(psycopg.OperationalError):  # the pool then replaces it
        database.check_unless_fresh(conn)
    assert conn.round_trips == 2


@pytest.mark.django_db(transaction=True)
def test_connections_the_server_ended_while_they_were_idle_are_replaced(monkeypatch):
    """The settings' pool, on PostgreSQL: the server ends every pooled connection (a restart,
    an administrator), and each query after FRESH_SECONDS gets one that works."""
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    monkeypatch.setattr(database, "FRESH_SECONDS", 0.05)
    for _ in range(3):  # each connection of the pool (first in, first out) is handed out
        connection.ensure_connection()
        connection.close()
    params = connection.get_connection_params()
    with psycopg.connect(
        **{k: v for k, v in params.items() if k not in ("cursor_factory", "context")},
        autocommit=True,
    ) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    assert ended
    time.sleep(0.1)
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        assert pid not in {pid for _, pid in ended}
        connection.close()
