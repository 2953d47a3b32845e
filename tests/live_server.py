"""A real Parley server for end-to-end tests: daphne (through `config.serve`, as deployed) in a
subprocess, on its own SQLite file or PostgreSQL database, and `manage.py worker` processes."""

import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "config.serve"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    def __init__(self, workdir: Path, *, database_url: str = "", **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "daphne.log"
        self.database_url = database_url or f"sqlite:///{workdir / 'live.sqlite3'}"
        self.env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "DEBUG": "false",
            "SECRET_KEY": "parley-live-test",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SCRIPTED_AGENT_DELAY": "0.03",
            **env,
        }
        if "REDIS_URL" not in env:
            self.env.pop("REDIS_URL", None)
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return result.stdout

    def start(self, *, probe_http: bool = True) -> None:
        """Start the server and wait until it serves a page (or, without `probe_http`, only
        accepts TCP connections: no request reaches the application)."""
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [*SERVE, "-b", "127.0.0.1", "-p", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited early:\n{self.log()}")
            try:
                if not probe_http:
                    socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
                    return
                with urllib.request.urlopen(f"{self.url}/login/", timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"daphne did not start in time:\n{self.log()}")

    def start_worker(self) -> subprocess.Popen:
        """A `manage.py worker` process serving the turn channel (needs REDIS_URL)."""
        log = (self.log_path.parent / f"worker-{time.monotonic_ns()}.log").open("a")
        return subprocess.Popen(
            [sys.executable, "manage.py", "worker"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def query(self, sql: str, *params) -> list[tuple]:
        """Read the server's database directly (placeholders: %s)."""
        if self.database_url.startswith("sqlite:///"):
            with sqlite3.connect(self.database_url.removeprefix("sqlite:///")) as connection:
                return connection.execute(sql.replace("%s", "?"), params).fetchall()
        with psycopg.connect(self.database_url) as connection:
            return connection.execute(sql, params).fetchall()


@contextmanager
def postgres_database(admin_url: str):
    """A new, empty PostgreSQL database for one test; dropped afterwards."""
    name = f"parley_live_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# A turn with two tool calls, started from `manage.py shell`; prints the conversation id.
START = """
from django.contrib.auth.models import User
from chat import services
conversation = services.create_conversation(owner=User.objects.get(username="demo"))
services.post_user_message(user=conversation.owner, conversation_id=conversation.pk,
                           text="What time is it?")
print(conversation.pk)
"""


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
