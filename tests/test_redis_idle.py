"""With REDIS_URL, connections that wait on an idle Redis stay up: a `manage.py worker`, a
websocket and a server-sent event stream all idle past every timeout (channels-redis's 5 s
blocking receive, the Redis socket timeout, the stream's keepalive, daphne's pings), then carry
the next turn. A Redis that accepts connections and never answers is still noticed: its worker
exits."""

import asyncio
import base64
import json
import os
import random
import re
import socketserver
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.live_server import ROOT, LiveServer

pytestmark = pytest.mark.live

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
# Past the Redis socket timeout (15 s, config/settings.py) and twice the stream's keepalive.
IDLE_SECONDS = 35
REPLY = "Two tools, one turn."  # how the scripted agent's answer to "What time is it?" ends


class WebSocket:
    """A minimal RFC 6455 client over asyncio streams (the suite has no websocket library):
    keeps the text messages, answers pings, and records the close code."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.messages: list[str] = []
        self.close_code: int | None = None
        self.reading = asyncio.create_task(self.read())

    @classmethod
    async def connect(cls, url: str, path: str, headers: dict[str, str]) -> "WebSocket":
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        request = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(request) + "\r\n\r\n").encode())
        response = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        assert response.startswith("HTTP/1.1 101"), response
        return cls(reader, writer)

    def send(self, opcode: int, payload: bytes) -> None:
        """One final frame; a client masks what it sends."""
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            head = bytes([0x80 | opcode, 0x80 | length])
        else:
            head = bytes([0x80 | opcode, 0x80 | 126]) + length.to_bytes(2, "big")
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(head + mask + masked)

    async def read(self) -> None:
        message = b""
        try:
            while True:
                first, second = await self.reader.readexactly(2)
                length = second & 0x7F
                if length == 126:
                    length = int.from_bytes(await self.reader.readexactly(2), "big")
                elif length == 127:
                    length = int.from_bytes(await self.reader.readexactly(8), "big")
                payload = await self.reader.readexactly(length)  # a server does not mask
                opcode = first & 0x0F
                if opcode == 0x8:  # close
                    self.close_code = int.from_bytes(payload[:2], "big") if payload else 1005
                    return
                if opcode == 0x9:  # ping
                    self.send(0xA, payload)
                elif opcode in (0x0, 0x1):  # continuation, text
                    message += payload
                    if first & 0x80:
                        self.messages.append(message.decode())
                        message = b""
        except asyncio.IncompleteReadError:
            self.close_code = 1006  # gone without a close frame

    async def close(self) -> None:
        self.reading.cancel()
        self.writer.close()
        await self.writer.wait_closed()


class Swallow(socketserver.BaseRequestHandler):
    """A Redis that accepts connections and reads them, but never answers."""

    def handle(self) -> None:
        while self.request.recv(4096):
            pass


async def log_in(http: httpx.AsyncClient) -> str:
    """The session id of demo / demo, signed in through the login form."""
    page = (await http.get("/login/")).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = await http.post(
        "/login/", data={"username": "demo", "password": "demo", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302, response.text
    return http.cookies["sessionid"]


async def read_stream(http: httpx.AsyncClient, url: str, headers: dict, events: list) -> None:
    """Append each event of the stream as (event, data), and each keepalive as ("keepalive",
    None), until the stream ends."""
    event = None
    async with http.stream("GET", url, headers=headers, timeout=None) as stream:
        async for line in stream.aiter_lines():
            if line == ": keepalive":
                events.append(("keepalive", None))
            elif line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((event, json.loads(line.removeprefix("data: "))))


async def eventually(predicate, seconds: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_idle_redis_connections_stay_up_and_a_silent_redis_is_noticed(tmp_path):
    server = LiveServer(tmp_path, REDIS_URL=f"{REDIS}/{random.randint(1, 15)}")
    server.manage("migrate", "--no-input", "-v", "0")
    server.manage("ensure_demo_user")
    token = server.manage("create_api_token", "demo").strip()

    silent = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Swallow)
    silent.daemon_threads = True
    threading.Thread(target=silent.serve_forever, daemon=True).start()
    silent_log = tmp_path / "silent-worker.log"
    with silent_log.open("w") as log:
        stuck = subprocess.Popen(
            [sys.executable, "manage.py", "worker"],
            cwd=ROOT,
            env={**server.env, "REDIS_URL": f"redis://127.0.0.1:{silent.server_address[1]}"},
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
            assert not stream.done(), f"the event stream ended: {events}"
            assert events.count(("keepalive", None)) >= 2  # its wait for events ran out twice
            # The same settings against a Redis that never answers: that worker gave up.
            assert stuck.poll() not in (None, 0), silent_log.read_text()
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
