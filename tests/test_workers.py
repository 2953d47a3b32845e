"""With REDIS_URL, turns run in `manage.py worker` processes; killing the worker that runs
a turn hands the turn to another worker, and it still completes exactly once. A worker rides
out a Redis restart and goes on running turns."""

import os
import random
import signal

import pytest

from tests.live_server import (
    START,
    LiveServer,
    RedisServer,
    assert_completed_once,
    holder,
    wait_for,
)

pytestmark = pytest.mark.live

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")


def test_turns_run_on_workers_and_survive_a_killed_worker(tmp_path):
    server = LiveServer(
        tmp_path,
        REDIS_URL=f"{REDIS}/{random.randint(1, 15)}",
        SCRIPTED_AGENT_DELAY="0.08",
        PARLEY_LEASE_SECONDS="2",
        PARLEY_SWEEP_SECONDS="0.3",
    )
    server.set_up_database()
    server.start()
    workers = [server.start_worker(), server.start_worker()]
    try:
        conversation_id = int(server.manage("shell", "-v", "0", "-c", START).strip())

        pid, _ = wait_for(lambda: holder(server, conversation_id), 30, "a worker to take it")
        runner = next(w for w in workers if w.pid == pid)  # a worker, not the web server
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        # Finished once, and the lease given back by the worker that finished it.
        assert_completed_once(server, conversation_id)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
        server.stop()


def test_a_worker_rides_out_a_redis_restart_and_runs_the_next_turn(tmp_path):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    server = LiveServer(tmp_path, REDIS_URL=redis.url)
    server.set_up_database()
    server.start()
    worker = server.start_worker()
    log = next(tmp_path.glob("worker-*.log"))
    try:
        wait_for(lambda: "worker listening" in log.read_text(), 30, "the worker to listen")
        # A turn first: the worker has served one when Redis goes away.
        assert_completed_once(server, int(server.manage("shell", "-v", "0", "-c", START)))
        redis.stop()
        # Down for a few seconds: the worker noticed, and tried again in vain three times.
        wait_for(
            lambda: (
                log.read_text().count("Redis still unavailable") >= 3 or worker.poll() is not None
            ),
            30,
            "the worker's tries",
        )
        assert worker.poll() is None, log.read_text()
        redis.start()
        wait_for(lambda: "Redis answers again" in log.read_text(), 15, "the worker to reconnect")

        # With REDIS_URL only workers run turns: this one ran it.
        assert_completed_once(server, int(server.manage("shell", "-v", "0", "-c", START)))
        assert worker.poll() is None, log.read_text()
        assert "Exception inside application" not in log.read_text()
    finally:
        worker.kill()
        worker.wait()
        server.stop()
        redis.stop()
