"""Parley processes for the benchmarks (tests/live_server.py's LiveServer, as deployed:
daphne through config.serve, `manage.py worker`), pointed at the benchmark's model."""

import contextlib
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

from tests.live_server import LiveServer

POSTGRES_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
# Databases of Redis reserved for the benchmark, so no other process's workers take its turns.
REDIS_DB = 13


def model_env(model_url: str) -> dict[str, str]:
    return {
        "AGENT_PROVIDER": "openai",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "bench",
        "AGENT_MODEL": "bench",
        "LOG_LEVEL": "WARNING",
    }


@contextlib.contextmanager
def postgres_database(template: str = ""):
    """A new database of the run's own (a copy of the database `template` names, if given),
    dropped afterwards; yields its URL."""
    name = f"parley_perf_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


class Servers(list):
    """The web servers (LiveServer), and the worker processes beside them (`workers`)."""

    workers: list[subprocess.Popen]

    def pids(self) -> list[int]:
        """Every Parley process: the web servers' and the workers'."""
        return [server.process.pid for server in self] + [w.pid for w in self.workers]


@contextlib.contextmanager
def parley(model_url: str, *, webs: int = 1, workers: int = 0, database_url: str = "", **env):
    """`webs` daphne processes (and `workers` workers) on one database; yields `Servers`."""
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-"))
    env = {**model_env(model_url), **env}
    first = LiveServer(workdir, database_url=database_url, **env)
    servers = [first] + [
        LiveServer(workdir / f"web{i}", database_url=first.database_url, **env)
        for i in range(1, webs)
    ]
    for server in servers[1:]:
        server.log_path.parent.mkdir(exist_ok=True)
    first.set_up_database()
    running: list[subprocess.Popen] = []
    try:
        for server in servers:
            server.start()
        running = [first.start_worker() for _ in range(workers)]
        started = Servers(servers)
        started.workers = running
        yield started
    finally:
        for process in running:
            process.terminate()
            process.wait(timeout=15)
        for server in servers:
            server.stop()
