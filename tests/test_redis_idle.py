"""With REDIS_URL, connections that wait on an idle Redis stay up: a `manage.py worker`, a
websocket and a server-sent event stream all idle past every timeout (channels-redis's 5 s
blocking receive, the Redis socket timeout, the stream's keepalive, daphne's pings), then carry
the next turn. A Redis that accepts connections and never answers is still noticed: its worker
exits (after riding out what could have been a restart).

The timeouts are set short, so that a few seconds of silence pass each of them; that the
default Redis socket timeout outlasts the blocking receive is checked against the settings."""

import asyncio
import json
import os
import random
import socketserver
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from channels_redis.core import RedisChannelLayer

from tests.live_clients import WebSocket, eventually, log_in, read_stream
from tests.live_server import ROOT, LiveServer

pytestmark = pytest.mark.live

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
# The Redis read timeout, set through REDIS_URL's query (config/settings.py: 15 s). It must
# outlast channels-redis's blocking receive, which Redis answers after 5 s even when nothing
# came (RedisChannelLayer.brpop_timeout): 8 s leaves a loaded machine time to read the answer.
SOCKET_TIMEOUT = 8
# An idle stream's keepalive (PARLEY_STREAM_KEEPALIVE_SECONDS: 15 s), daphne's websocket
# pings (--ping-interval: 20 s), and how long a worker tries to reach a Redis it lost
# (PARLEY_WORKER_RIDE_OUT_SECONDS: 30 s).
KEEPALIVE_SECONDS = 2
PING_SECONDS = 2
RIDE_OUT_SECONDS = 3
# The silence the test is about: past the read timeout, and past the blocking receive, the
# keepalive and the pings more than once each. Nothing is awaited: nothing is to happen. (That
# the default read timeout outlasts the blocking receive: tests/test_redis_events.py.)
IDLE_SECONDS = SOCKET_TIMEOUT + 1
REPLY = "Two tools, one turn."  # how the scripted agent's answer to "What time is it?" ends


class Swallow(socketserver.BaseRequestHandler):
    """A Redis that accepts connections and reads them, but never answers."""

    def handle(self) -> None:
        while self.request.recv(4096):
            pass


def test_idle_redis_connections_stay_up_and_a_silent_redis_is_noticed(tmp_path):
    assert RedisChannelLayer.brpop_timeout < SOCKET_TIMEOUT
    server = LiveServer(
        tmp_path,
        REDIS_URL=f"{REDIS}/{random.randint(1, 15)}?socket_timeout={SOCKET_TIMEOUT}",
        PARLEY_STREAM_KEEPALIVE_SECONDS=str(KEEPALIVE_SECONDS),
        PARLEY_WORKER_RIDE_OUT_SECONDS=str(RIDE_OUT_SECONDS),
    )
    server.daphne_args = ["--ping-interval", str(PING_SECONDS)]
    server.set_up_database()
    token = server.manage("create_api_token", "demo").strip()

    silent = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Swallow)
    silent.daemon_threads = True
    threading.Thread(target=silent.serve_forever, daemon=True).start()
    silent_log = tmp_path / "silent-worker.log"
    with silent_log.open("w") as log:
        stuck = subprocess.Popen(
            [sys.executable, "manage.py", "worker"],
            cwd=ROOT,
            env={
                **server.env,
                "REDIS_URL": f"redis://127.0.0.1:{silent.server_address[1]}"
                f"?socket_timeout={SOCKET_TIMEOUT}",
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server.start()
    worker = server.start_worker()

    def worker_log() -> str:
        return "".join(path.read_text() for path in tmp_path.glob("worker-*.log"))

    async def idle_then_chat() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            api = {"Authorization": f"Bearer {token}"}
            session = await log_in(http)
            conversation = (await http.post("/api/v1/conversations", json={}, headers=api)).json()
            messages_url = f"/api/v1/conversations/{conversation['id']}/messages"
            socket = await WebSocket.connect(
                server.url,
                f"/ws/conversations/{conversation['id']}/",
                {"Origin": server.url, "Cookie": f"sessionid={session}"},
            )
            sync = {"type": "sync", "after": conversation["seq"]}
            socket.send(0x1, json.dumps(sync).encode())
            events: list = []
            stream = asyncio.create_task(
                read_stream(http, f"/api/v1/conversations/{conversation['id']}/events", api, events)
            )
            await eventually(lambda: events, 10, "the stream's first event")

            await asyncio.sleep(IDLE_SECONDS)
            assert worker.poll() is None, f"the worker exited while idle:\n{worker_log()}"
            assert server.process.poll() is None, f"daphne exited while idle:\n{server.log()}"
            assert socket.close_code is None, f"the websocket closed with {socket.close_code}"
            assert socket.pings >= 2  # daphne's pings came, and were answered
            assert not stream.done(), f"the event stream ended: {events}"
            assert events.count(("keepalive", None)) >= 2  # its wait for events ran out twice
            # The same settings against a Redis that never answers: that worker gave up, once
            # its receive timed out and it had tried again for RIDE_OUT_SECONDS.
            await eventually(lambda: stuck.poll() is not None, 30, "it to exit")
            assert stuck.poll() != 0, silent_log.read_text()
            assert "TimeoutError" in silent_log.read_text()

            seen = len(events)
            result = (
                await http.post(
                    messages_url, json={"content": "What time is it?", "wait": 30}, headers=api
                )
            ).json()
            assert result["status"] == "complete", result
            assert result["response"].endswith(REPLY)
            await eventually(
                lambda: any(REPLY in message for message in socket.messages),
                10,
                "the websocket's push of the reply",
            )

            def streamed_the_turn() -> bool:
                after = events[seen:]
                return any(e == "message" and REPLY in d["text"] for e, d in after) and any(
                    e == "state_change" and d["state"] == "idle" for e, d in after
                )

            await eventually(streamed_the_turn, 10, "the stream's reply and end of turn")
            assert worker.poll() is None, worker_log()
            stream.cancel()
            await socket.close()

    try:
        # A thread of its own: after the browser tests, Playwright's event loop is still set as
        # this thread's running loop, and asyncio.run refuses to start beside it.
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, idle_then_chat()).result()
    finally:
        for process in (worker, stuck):
            process.kill()
            process.wait()
        server.stop()
        silent.shutdown()
        silent.server_close()
