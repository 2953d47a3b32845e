"""Processes stopping and dying, with the default lease and sweep settings, on PostgreSQL and
Redis as a team runs Parley: a stopped worker hands its turn over at once, a killed one is
replaced within ten seconds, a web process sweeps from startup without waiting for a request,
and a stopped web process ends its event streams and `wait` calls and exits."""

import os
import random
import signal
import subprocess
import threading
import time

import httpx
import pytest

from tests.live_server import (
    START,
    LiveServer,
    assert_completed_once,
    holder,
    postgres_database,
    wait_for,
)

pytestmark = pytest.mark.live

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
# Slow enough that a turn is still running when a process is stopped under it.
SLOW_AGENT = "0.25"


@pytest.fixture
def server(tmp_path):
    with postgres_database(POSTGRES_URL) as database_url:
        server = LiveServer(
            tmp_path,
            database_url=database_url,
            REDIS_URL=f"{REDIS}/{random.randint(1, 15)}",
            SCRIPTED_AGENT_DELAY=SLOW_AGENT,
        )
        server.set_up_database()
        workers: list[subprocess.Popen] = []
        server.workers = workers
        try:
            yield server
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
            server.stop(kill=True)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_worker_that_stops_or_dies_mid_turn_is_replaced_in_time(server, how):
    server.start()
    server.workers += [server.start_worker(), server.start_worker()]
    conversation_id = int(server.manage("shell", "-v", "0", "-c", START).strip())
    pid, token = wait_for(lambda: holder(server, conversation_id), 30, "a worker to take it")
    running = next(w for w in server.workers if w.pid == pid)
    other = next(w for w in server.workers if w.pid != pid)

    stopped_at = time.monotonic()
    running.send_signal(getattr(signal, how))

    def taken_over():
        now = holder(server, conversation_id)
        return now is not None and now[0] == other.pid and now[1] > token

    wait_for(taken_over, 15, "the other worker to take the turn")
    handover = time.monotonic() - stopped_at
    running.wait(timeout=10)
    exited = time.monotonic() - stopped_at
    # A stopped worker hands its turn back at once; a killed one's lease must lapse first.
    assert handover < (3 if how == "SIGTERM" else 10), f"handover took {handover:.1f}s"
    assert exited < 10
    if how == "SIGTERM":
        assert running.returncode == 0
    assert_completed_once(server, conversation_id)


def test_a_web_process_sweeps_from_startup_without_a_request(tmp_path):
    with postgres_database(POSTGRES_URL) as database_url:
        # In-process turns (no Redis): the web process itself runs them.
        server = LiveServer(tmp_path, database_url=database_url, SCRIPTED_AGENT_DELAY="0.02")
        server.set_up_database()
        # Started while no server runs: nothing takes it until a process sweeps.
        conversation_id = int(server.manage("shell", "-v", "0", "-c", START).strip())
        assert server.query(
            "SELECT agent_state FROM chat_conversation WHERE id = %s", conversation_id
        ) == [("llm_requesting",)]
        server.start(probe_http=False)
        try:
            assert_completed_once(server, conversation_id)
        finally:
            server.stop()


def test_a_stopped_web_process_ends_streams_and_waits_and_exits(server):
    server.start()
    token = server.manage("create_api_token", "demo").strip()
    server.workers.append(server.start_worker())
    client = httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    conversation = client.post("/conversations", json={"title": "handover"}).json()
    outcomes: dict[str, object] = {}

    def stream():
        try:
            with client.stream("GET", f"/conversations/{conversation['id']}/events") as response:
                for _ in response.iter_lines():
                    pass
            outcomes["stream"] = "ended"
        except httpx.HTTPError as error:
            outcomes["stream"] = repr(error)

    def wait_call():
        try:
            response = client.post(
                f"/conversations/{conversation['id']}/messages",
                json={"content": "What time is it?", "wait": 60},
            )
            outcomes["wait"] = response.status_code
        except httpx.HTTPError as error:
            outcomes["wait"] = repr(error)

    threads = [threading.Thread(target=stream), threading.Thread(target=wait_call)]
    for thread in threads:
        thread.start()
    wait_for(lambda: holder(server, conversation["id"]), 30, "the turn to start")

    stopped_at = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=10)
    for thread in threads:
        thread.join(10)
    assert time.monotonic() - stopped_at < 10
    assert not any(thread.is_alive() for thread in threads), outcomes
    # Both answered before the process left: the stream ended, the wait said "running".
    assert outcomes == {"stream": "ended", "wait": 200}
    server.process = None
    # The turn ran on the worker, which carries on; nothing was lost with the web process.
    assert_completed_once(server, conversation["id"])


def test_a_stopped_web_process_hands_its_turn_to_another_at_once(tmp_path):
    with postgres_database(POSTGRES_URL) as database_url:
        # No Redis: each web process runs turns itself, and sweeps up the others' orphans.
        web = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            web.append(
                LiveServer(
                    tmp_path / name, database_url=database_url, SCRIPTED_AGENT_DELAY=SLOW_AGENT
                )
            )
        web[0].set_up_database()
        try:
            # Both run before the turn starts, so it cannot end before the other is up.
            for server in web:
                server.start()
            conversation_id = int(web[0].manage("shell", "-v", "0", "-c", START).strip())
            pid, token = wait_for(lambda: holder(web[0], conversation_id), 30, "a runner")
            running, other = web if pid == web[0].process.pid else web[::-1]
            assert pid == running.process.pid
            stopped_at = time.monotonic()
            running.process.send_signal(signal.SIGTERM)

            def taken_over():
                now = holder(other, conversation_id)
                return now is not None and now[0] == other.process.pid and now[1] > token

            wait_for(taken_over, 15, "the other web process to take the turn")
            assert time.monotonic() - stopped_at < 3
            running.process.wait(timeout=10)
            assert running.process.returncode == 0
            running.process = None
            assert_completed_once(other, conversation_id)
        finally:
            for server in web:
                server.stop(kill=True)
