"""Real clients for live tests: a minimal websocket client, the login form, and a reader of
server-sent events (the suite has no websocket library)."""

import asyncio
import base64
import contextlib
import json
import os
import re
import time

import httpx


class HandshakeRefused(Exception):
    """The server answered the websocket handshake with something other than 101."""

    def __init__(self, status_line: str) -> None:
        super().__init__(status_line)
        self.status_line = status_line


class WebSocket:
    """A minimal RFC 6455 client over asyncio streams (the suite has no websocket library):
    keeps the text messages, answers pings, and records the close code."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.messages: list[str] = []
        self.received_at: list[float] = []  # time.time() of each message
        self.close_code: int | None = None
        self.closed_at: float | None = None
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
        if not response.startswith("HTTP/1.1 101"):
            writer.close()
            raise HandshakeRefused(response.splitlines()[0])
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
                    self.closed_at = time.time()
                    return
                if opcode == 0x9:  # ping
                    self.send(0xA, payload)
                elif opcode in (0x0, 0x1):  # continuation, text
                    message += payload
                    if first & 0x80:
                        self.messages.append(message.decode())
                        self.received_at.append(time.time())
                        message = b""
        except asyncio.IncompleteReadError:
            self.close_code = 1006  # gone without a close frame
            self.closed_at = time.time()

    async def close(self) -> None:
        self.reading.cancel()
        self.writer.close()
        with contextlib.suppress(ConnectionError):  # the server may have closed it already
            await self.writer.wait_closed()


async def log_in(http: httpx.AsyncClient, username: str = "demo", password: str = "demo") -> str:
    """The session id of `username`, signed in through the login form."""
    page = (await http.get("/login/")).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = await http.post(
        "/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
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


class EventStream:
    """A server-sent event stream read in the background: each event with the time it came
    (time.time()), and when the stream ended."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict | None = None) -> None:
        self.events: list[tuple[str, dict, float]] = []
        self.ended_at: float | None = None
        self.status: int | None = None
        self.task = asyncio.create_task(self.read(http, url, headers or {}))

    async def read(self, http: httpx.AsyncClient, url: str, headers: dict) -> None:
        event = None
        try:
            async with http.stream("GET", url, headers=headers, timeout=None) as stream:
                self.status = stream.status_code
                async for line in stream.aiter_lines():
                    if line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        data = json.loads(line.removeprefix("data: "))
                        self.events.append((event, data, time.time()))
        finally:
            self.ended_at = time.time()

    def names(self) -> list[str]:
        return [name for name, _, _ in self.events]

    def after(self, moment: float) -> list[str]:
        """The events that came after `moment`."""
        return [name for name, _, at in self.events if at > moment]

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
