"""A web process serves again within seconds of PostgreSQL coming back after an outage longer
than psycopg_pool's default backoff tolerates (its pause between tries doubles without end,
so a 40 s outage left it waiting ~20 s more; a long one, a minute). The outage is a TCP proxy
in front of the shared PostgreSQL, cut (open connections dropped, new ones refused) and
restored on the same port: the server itself is never stopped."""

import contextlib
import os
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.live_server import LiveServer, free_port, postgres_database, wait_for

pytestmark = [pytest.mark.live, pytest.mark.postgres]

ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
# Longer than psycopg_pool's default backoff tolerates: its tries after the first failure come
# at ~1, 3, 7, 15, 31 and 63 s (each ±10%), so PostgreSQL back at 20 s is tried again only at
# 28-34 s, past RECOVERY_SECONDS (9 s after, once with the default reconnect_timeout); back
# at 40 s, only at ~63 s. Any outage between the tries at ~15 and ~31 s tells the two apart;
# shorter, the try at ~15 s may come just after it.
OUTAGE_SECONDS = float(os.environ.get("PARLEY_TEST_OUTAGE_SECONDS", "20"))
# What "within seconds" means here.
RECOVERY_SECONDS = 5.0


class TcpProxy:
    """A TCP proxy to `upstream` on a port of its own, which the test cuts off (open
    connections dropped, new ones refused) and restores on the same port."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.lock = threading.Lock()
        self.sockets: set[socket.socket] = set()
        self.listener: socket.socket | None = None

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self.listener = self.listener, None
        self._close(listener)  # new connections are refused (shutdown ends its accept())
        with self.lock:
            open_, self.sockets = self.sockets, set()
        for sock in open_:
            self._close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets |= {client, server}
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            self._close(sock)

    @staticmethod
    def _close(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


class Traffic:
    """Someone using the API all along: one request after another (each may wait the pool's
    DB_POOL_TIMEOUT for a connection), each recorded as (sent, answered, status)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.answers: list[tuple[float, float, int]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            sent = time.monotonic()
            try:
                status = httpx.get(self.url, headers=self.headers, timeout=60).status_code
            except httpx.HTTPError:
                status = 0
            self.answers.append((sent, time.monotonic(), status))
            if status != 200:
                time.sleep(0.2)  # a client trying again, not a flood

    def served_after(self, moment: float) -> float | None:
        """When the first request sent or answered after `moment` was served, if one was."""
        for _sent, answered, status in list(self.answers):
            if status == 200 and answered > moment:
                return answered
        return None

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=90)


def test_a_web_process_serves_again_within_seconds_of_the_database_coming_back(tmp_path):
    with postgres_database(ADMIN_URL) as database_url:
        parts = urlsplit(database_url)
        proxy = TcpProxy((parts.hostname, parts.port or 5432))
        proxy.open()
        proxied = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))
        server = LiveServer(tmp_path, database_url=proxied)
        token = server.manage("create_api_token", "demo").strip()
        server.start()
        traffic = Traffic(f"{server.url}/api/v1/conversations", token)
        try:
            wait_for(lambda: traffic.served_after(0), 30, "the API to answer")
            proxy.cut()
            cut_at = time.monotonic()
            # The outage lasts OUTAGE_SECONDS (the scenario), while requests keep coming.
            wait_for(
                lambda: time.monotonic() - cut_at >= OUTAGE_SECONDS,
                OUTAGE_SECONDS + 5,
                "the outage to last",
            )
            assert traffic.served_after(cut_at + 1) is None, "the API answered during the outage"
            proxy.open()
            back_at = time.monotonic()
            served = wait_for(lambda: traffic.served_after(back_at), 120, "the API to answer")
            recovery = served - back_at
            print(f"served again {recovery:.1f}s after PostgreSQL came back")
            assert recovery < RECOVERY_SECONDS, f"served again only after {recovery:.1f}s"
        finally:
            traffic.stop()
            server.stop()
            proxy.cut()
