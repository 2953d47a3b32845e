"""With REDIS_URL, turns run in `manage.py worker` processes; killing the worker that runs
a turn hands the turn to another worker, and it still completes exactly once."""

import os
import random
import signal

import pytest

from tests.live_server import START, LiveServer, assert_completed_once, holder, wait_for

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
