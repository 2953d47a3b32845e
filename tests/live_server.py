"""A real Parley server for end-to-end tests: daphne (through `config.serve`, as deployed) in a
subprocess, on its own SQLite file or PostgreSQL database, and `manage.py worker` processes.

Each server's database starts as a copy of one migrated once per test process, with the demo
user (`migrated_template`): a SQLite file copied, or a PostgreSQL database created from it as a
template. Migrating took two `manage.py` processes for every server."""

import atexit
import json
import os
import secrets
import shutil
import socket
import sqlite3
import string
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "config.serve"]
# The servers run Parley's own settings, as deployed (not the suite's, tests/settings.py),
# under one key for every process of this test process: a random one, long enough for a
# production process (config/secret_key.py).
SERVER_SETTINGS = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "SECRET_KEY": secrets.token_urlsafe(50),
}


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
            **SERVER_SETTINGS,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SCRIPTED_AGENT_DELAY": "0.03",
            # One user (demo) drives many tests against one server, faster than a person:
            # the per-user rates are off unless a test sets them (tests/test_limits_live.py).
            "PARLEY_MESSAGES_PER_MINUTE": "0",
            "PARLEY_CONVERSATIONS_PER_MINUTE": "0",
            "PARLEY_MAX_RUNNING_TURNS": "0",
            **env,
        }
        if "REDIS_URL" not in env:
            self.env.pop("REDIS_URL", None)
        self.daphne_args: list[str] = []  # more options for daphne, such as --ping-interval
        self.process: subprocess.Popen | None = None

    def set_up_database(self) -> None:
        """A migrated database with the demo user (demo / demo): a copy of the template for a
        new SQLite file or a database postgres_database made; else migrate this one."""
        if self.database_url in _from_template:
            return
        path = self.database_url.removeprefix("sqlite:///")
        if self.database_url.startswith("sqlite:///") and not Path(path).exists():
            shutil.copyfile(migrated_template("sqlite"), path)
            return
        self.manage("migrate", "--no-input", "-v", "0")
        self.manage("ensure_demo_user")

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
            [*SERVE, "-b", "127.0.0.1", "-p", str(self.port), *self.daphne_args],
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

    def execute(self, sql: str, *params) -> None:
        """Write to the server's database directly (placeholders: %s), committed."""
        if self.database_url.startswith("sqlite:///"):
            with sqlite3.connect(self.database_url.removeprefix("sqlite:///")) as connection:
                connection.execute(sql.replace("%s", "?"), params)
            return
        with psycopg.connect(self.database_url) as connection:
            connection.execute(sql, params)


# Database URLs made from the template (already migrated, with the demo user).
_from_template: set[str] = set()
_templates: dict[str, str] = {}


def migrated_template(kind: str, admin_url: str = "") -> str:
    """This process's migrated database with the demo user, made on first use: the path of a
    SQLite file (`kind` "sqlite"), or the name of a PostgreSQL database on `admin_url`'s
    server ("postgres"), dropped when the process exits."""
    if kind in _templates:
        return _templates[kind]
    if kind == "sqlite":
        location = str(Path(tempfile.mkdtemp(prefix="parley-template-")) / "template.sqlite3")
        url = f"sqlite:///{location}"
    else:
        location = f"parley_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{location}"')
        atexit.register(_drop_database, admin_url, location)
        url = admin_url.rsplit("/", 1)[0] + f"/{location}"
    env = {**os.environ, **SERVER_SETTINGS, "DATABASE_URL": url, "DEBUG": "false"}
    for args in (["migrate", "--no-input", "-v", "0"], ["ensure_demo_user"]):
        subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, timeout=120
        )
    _templates[kind] = location
    return location


def _drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def postgres_database(admin_url: str):
    """A new PostgreSQL database for one test, migrated, with the demo user (made from the
    template); dropped afterwards."""
    template = migrated_template("postgres", admin_url)
    name = f"parley_live_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    _from_template.add(url)
    try:
        yield url
    finally:
        _from_template.discard(url)
        _drop_database(admin_url, name)


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


# What a script that `race` runs prints once it is set up; it then waits for the word to go.
READY = """
import sys
print("ready", flush=True)
sys.stdin.readline()
"""


def race(env: dict[str, str], scripts: dict[str, str], timeout: float = 60) -> dict:
    """Run each script in a `manage.py shell` of its own, all let go at once: each sets up,
    runs READY and waits; once every one has said it is ready, all are told to go. Each
    one's (return code, what it printed after "ready", its stderr)."""
    processes = {
        name: subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", script],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, script in scripts.items()
    }
    try:
        with ThreadPoolExecutor(len(processes)) as readers:
            ready = {name: readers.submit(p.stdout.readline) for name, p in processes.items()}
            deadline = time.monotonic() + timeout
            for name, line in ready.items():
                try:
                    said = line.result(timeout=max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    said = ""
                if said != "ready\n":
                    for process in processes.values():
                        process.kill()  # ends every readline still waiting
                    raise AssertionError(f"{name} never got ready: {processes[name].stderr.read()}")
        for process in processes.values():
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = {name: p.communicate(timeout=timeout) for name, p in processes.items()}
        return {name: (processes[name].returncode, *outputs[name]) for name in processes}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def holder(server, conversation_id: int) -> tuple[int, int] | None:
    """(pid of the runner holding the turn, lease token) once it made its first request."""
    [(owner, steps, token)] = server.query(
        "SELECT lease_owner, turn_steps, lease_token FROM chat_conversation WHERE id = %s",
        conversation_id,
    )
    return (int(owner.split(":")[1]), token) if owner and steps >= 1 else None


def assert_completed_once(server, conversation_id: int) -> None:
    wait_for(
        lambda: (
            server.query(
                "SELECT agent_state, lease_owner FROM chat_conversation WHERE id = %s",
                conversation_id,
            )
            == [("idle", "")]
        ),
        60,
        "the turn to finish",
    )
    rows = server.query(
        'SELECT role, blocks FROM chat_message WHERE conversation_id = %s ORDER BY "order"',
        conversation_id,
    )
    assert [role for role, _ in rows] == ["user", "assistant", "tool", "tool", "assistant"]
    blocks = rows[-1][1]  # a list from PostgreSQL's jsonb, a string from SQLite
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    assert "6 × 7 = **42**" in blocks[0]["text"]


NGINX_MAIN = """
daemon off;
user root;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    proxy_read_timeout {read_timeout};
    include {tmp}/parley.conf;
}}
"""


def mcp_routes(addresses: list[str]) -> list[str]:
    """The MCP session routes of the live servers at `addresses`, as the operators' docs get
    them: `manage.py mcp_route` with the servers' settings."""
    printed = subprocess.run(
        [sys.executable, "manage.py", "mcp_route", *addresses],
        cwd=ROOT,
        env={**os.environ, **SERVER_SETTINGS},
        capture_output=True,
        text=True,
        check=True,
    )
    return printed.stdout.split()


class Nginx:
    """Debian's nginx in the foreground on a loopback port, with deploy/'s configuration for
    Parley rendered as docs/operators/deploying.md says (envsubst: only the PARLEY_
    placeholders). `read_timeout`: nginx's own proxy_read_timeout, which every location of
    the template that does not set its own inherits (nginx's default: 60 s)."""

    def __init__(
        self, workdir: Path, *, web: list[str], static_root: Path, read_timeout: str = "60s"
    ) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        template = (ROOT / "deploy" / "nginx" / "parley.conf.template").read_text()
        values = {
            "PARLEY_LISTEN": f"127.0.0.1:{self.port}",
            "PARLEY_SERVER_NAME": "127.0.0.1",
            "PARLEY_WEB_1": web[0],
            "PARLEY_WEB_2": web[1],
            **dict(zip(("PARLEY_MCP_ROUTE_1", "PARLEY_MCP_ROUTE_2"), mcp_routes(web), strict=True)),
            "PARLEY_STATIC_ROOT": str(static_root),
        }
        (self.dir / "parley.conf").write_text(string.Template(template).safe_substitute(values))
        (self.dir / "nginx.conf").write_text(
            NGINX_MAIN.format(tmp=self.dir, read_timeout=read_timeout)
        )
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        log = (self.dir / "nginx.out").open("a")
        self.process = subprocess.Popen(
            ["/usr/sbin/nginx", "-p", str(self.dir), "-c", str(self.dir / "nginx.conf")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._accepting, 15, "nginx to listen")

    def _accepting(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError((self.dir / "nginx.out").read_text() + self.error_log())
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def error_log(self) -> str:
        path = self.dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


def run_isolated(
    args: list[str], tmp_path: Path, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess:
    """Run Python in the project with only `env` in the environment (and a SQLite database of
    the test's own unless `env` names one), as a fresh process sees the settings."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'isolated.sqlite3'}",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class RedisServer:
    """A redis-server of the test's own on a free port, without persistence, that the test
    may stop and start again on the same port (the shared Redis on 6379 is never touched)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        log = (self.dir / "redis.log").open("a")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.dir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._answers, 15, "redis-server to answer")

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError((self.dir / "redis.log").read_text())
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (its clients' connections are closed; new ones are refused)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
