"""Real clients for live tests: a minimal websocket client, the login form, a signed-in
person's page actions, and a reader of server-sent events (the suite has no websocket
library)."""

import asyncio
import base64
import contextlib
import json
import os
import re
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.live_server import LiveServer


class HandshakeRefused(Exception):
    """The server answered the websocket handshake with something other than 101."""

    def __init__(self, status_line: str) -> None:
        super().__init__(status_line)
        self.status_line = status_line


# What Chromium offers (RFC 7692): the server may ask for a smaller client window.
DEFLATE_OFFER = "permessage-deflate; client_max_window_bits"
# What a compressed message's deflate data lacks: the empty stored block of Z_SYNC_FLUSH.
DEFLATE_TAIL = b"\x00\x00\xff\xff"


def extension_params(header: str) -> dict[str, str | bool]:
    """The parameters of a permessage-deflate response header, e.g.
    {"client_max_window_bits": "10"} (a parameter without a value is True)."""
    name, *params = (part.strip() for part in header.split(";"))
    if name != "permessage-deflate":
        raise ValueError(f"not permessage-deflate: {header!r}")
    parsed: dict[str, str | bool] = {}
    for param in params:
        key, _, value = param.partition("=")
        parsed[key.strip()] = value.strip().strip('"') or True
    return parsed


class Deflate:
    """permessage-deflate (RFC 7692) as the handshake settled it, for one client socket:
    raw deflate each way, the context kept across messages unless the other side said no."""

    def __init__(self, header: str) -> None:
        self.params = extension_params(header)
        self.server_window = int(self.params.get("server_max_window_bits", 15))
        self.client_window = int(self.params.get("client_max_window_bits", 15))
        self.server_takeover = "server_no_context_takeover" not in self.params
        self.client_takeover = "client_no_context_takeover" not in self.params
        self.decompressor = zlib.decompressobj(-self.server_window)
        self.compressor = zlib.compressobj(wbits=-self.client_window)

    def decompress(self, payload: bytes) -> bytes:
        if not self.server_takeover:
            self.decompressor = zlib.decompressobj(-self.server_window)
        return self.decompressor.decompress(payload + DEFLATE_TAIL)

    def compress(self, payload: bytes) -> bytes:
        if not self.client_takeover:
            self.compressor = zlib.compressobj(wbits=-self.client_window)
        data = self.compressor.compress(payload) + self.compressor.flush(zlib.Z_SYNC_FLUSH)
        return data.removesuffix(DEFLATE_TAIL)


def offered(deflate: bool | str) -> str:
    """The Sec-WebSocket-Extensions offer for WebSocket.connect's `deflate`."""
    return DEFLATE_OFFER if deflate is True else deflate or ""


class WebSocket:
    """A minimal RFC 6455 client over asyncio streams (the suite has no websocket library):
    keeps the text messages, answers pings, and records the close code. A close frame is
    answered, as a browser does, and the socket read on until the server ends the connection
    (`reading` is then done): a message after the close frame is kept, to be seen.

    With `deflate`, it offers permessage-deflate as Chromium does (or the offer given);
    `extensions` is what the server answered (None: not accepted), and then messages go both
    ways compressed. `messages` are always the text as the application sent it; `wire_sizes`
    are the bytes each message took on the socket (frame headers and payloads), `wire_bytes`
    all frames' bytes."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, extensions: str | None
    ) -> None:
        self.reader, self.writer = reader, writer
        self.extensions = extensions
        self.deflate = Deflate(extensions) if extensions else None
        self.messages: list[str] = []
        self.received_at: list[float] = []  # time.time() of each message
        self.wire_sizes: list[int] = []  # bytes read for each message, frame headers included
        self.wire_bytes = 0  # bytes read for all frames, control frames included
        self.compressed: list[bool] = []  # whether each message came compressed (RSV1)
        self.close_code: int | None = None
        self.closed_at: float | None = None
        self.pings = 0  # pings the server sent (each answered)
        self.reading = asyncio.create_task(self.read())

    @classmethod
    async def connect(
        cls, url: str, path: str, headers: dict[str, str], *, deflate: bool | str = False
    ) -> "WebSocket":
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        request = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
            "Sec-WebSocket-Version: 13",
            *([f"Sec-WebSocket-Extensions: {offer}"] if (offer := offered(deflate)) else []),
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(request) + "\r\n\r\n").encode())
        response = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        if not response.startswith("HTTP/1.1 101"):
            writer.close()
            raise HandshakeRefused(response.splitlines()[0])
        extensions = None
        for line in response.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "sec-websocket-extensions":
                extensions = value.strip()
        if extensions and not deflate:
            writer.close()
            raise AssertionError(f"the server chose an extension nobody offered: {extensions}")
        return cls(reader, writer, extensions)

    def send(self, opcode: int, payload: bytes) -> None:
        """One final frame, compressed if permessage-deflate is on (control frames never)."""
        if self.deflate is not None and opcode < 0x8:
            self.send_frame(opcode, self.deflate.compress(payload), rsv1=True)
        else:
            self.send_frame(opcode, payload)

    def send_frame(self, opcode: int, payload: bytes, *, rsv1: bool = False) -> None:
        """One final frame of `payload` as is (RSV1 marks it compressed); a client masks
        what it sends."""
        mask = os.urandom(4)
        length = len(payload)
        first = 0x80 | (0x40 if rsv1 else 0) | opcode
        if length < 126:
            head = bytes([first, 0x80 | length])
        elif length < 1 << 16:
            head = bytes([first, 0x80 | 126]) + length.to_bytes(2, "big")
        else:
            head = bytes([first, 0x80 | 127]) + length.to_bytes(8, "big")
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(head + mask + masked)

    async def read(self) -> None:
        message = b""
        compressed = False
        wire = 0  # bytes of the message's frames so far
        try:
            while True:
                first, second = await self.reader.readexactly(2)
                size = 2
                length = second & 0x7F
                if length == 126:
                    length = int.from_bytes(await self.reader.readexactly(2), "big")
                    size += 2
                elif length == 127:
                    length = int.from_bytes(await self.reader.readexactly(8), "big")
                    size += 8
                payload = await self.reader.readexactly(length)  # a server does not mask
                size += length
                self.wire_bytes += size
                opcode = first & 0x0F
                if first & 0x40 and (self.deflate is None or opcode not in (0x1, 0x2)):
                    # RSV1 without the extension, or on a frame that cannot carry it: a
                    # browser fails the connection (1002, protocol error).
                    self.close_code = 1002
                    self.closed_at = time.time()
                    return
                if opcode == 0x8:  # close
                    if self.close_code is None:
                        self.close_code = int.from_bytes(payload[:2], "big") if payload else 1005
                        self.closed_at = time.time()
                        self.send(0x8, payload[:2])
                    continue
                if opcode == 0x9:  # ping
                    self.pings += 1
                    self.send(0xA, payload)
                elif opcode in (0x0, 0x1):  # continuation, text
                    if opcode == 0x1:
                        compressed = bool(first & 0x40)
                    message += payload
                    wire += size
                    if first & 0x80:
                        if compressed:
                            try:
                                message = self.deflate.decompress(message)
                            except zlib.error:  # a browser fails the connection (1007)
                                self.close_code = 1007
                                self.closed_at = time.time()
                                return
                        self.messages.append(message.decode())
                        self.received_at.append(time.time())
                        self.wire_sizes.append(wire)
                        self.compressed.append(compressed)
                        message, wire = b"", 0
        except (asyncio.IncompleteReadError, ConnectionResetError):
            if self.close_code is None:
                self.close_code = 1006  # gone without a close frame (or dropped: reset)
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


def run(coroutine):
    """Run `coroutine` to its end on a thread of its own: after the browser tests,
    Playwright's loop is this thread's."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


class SignedIn:
    """A signed-in browser session (cookies, CSRF token) doing what the conversation page
    does: new conversations, messages, and the conversation's websocket."""

    def __init__(self, url: str, *, timeout: float = 30) -> None:
        self.url = url
        self.http = httpx.AsyncClient(base_url=url, timeout=timeout)
        self.session = ""

    async def __aenter__(self) -> "SignedIn":
        await self.log_in()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def log_in(self) -> None:
        self.session = await log_in(self.http)

    async def close(self) -> None:
        await self.http.aclose()

    def headers(self) -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies["csrftoken"], "HX-Request": "true"}

    async def new_conversation(self) -> int:
        """An empty conversation (the page creates one only with its first message; the JSON
        API, signed in by the session, creates one as it is)."""
        response = await self.http.post("/api/v1/conversations", json={}, headers=self.headers())
        response.raise_for_status()
        return response.json()["id"]

    async def say(self, conversation_id: int, text: str) -> None:
        response = await self.http.post(
            f"/c/{conversation_id}/messages/", data={"text": text}, headers=self.headers()
        )
        response.raise_for_status()

    async def open_socket(
        self,
        conversation_id: int,
        *,
        deflate: bool | str = False,
        url: str = "",
        after: int | None = 0,
    ) -> "WebSocket":
        """The conversation's websocket (through `url` if given), synced from `after` (None:
        no sync); with `deflate`, it offers permessage-deflate (True: as browsers do)."""
        url = url or self.url
        socket = await WebSocket.connect(
            url,
            f"/ws/conversations/{conversation_id}/",
            {"Origin": url, "Cookie": f"sessionid={self.session}"},
            deflate=deflate,
        )
        if after is not None:
            socket.send(0x1, json.dumps({"type": "sync", "after": after}).encode())
        return socket


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


# --- A flood from one user while another's turn runs ---------------------------------------

FLOOD_MESSAGES = 200
FLOOD_STREAMS = 300
# The server's settings for the flood: the default limits.
FLOOD_ENV = {
    "SCRIPTED_AGENT_DELAY": "0.1",  # a victim turn of about 2.5 s, like a model's
    # The defaults of config/settings.py, which LiveServer otherwise turns off.
    "PARLEY_MESSAGES_PER_MINUTE": "30",
    "PARLEY_CONVERSATIONS_PER_MINUTE": "20",
    "PARLEY_MAX_RUNNING_TURNS": "3",
    "PARLEY_MAX_STREAMS": "10",
}


@contextlib.contextmanager
def flood_server(workdir):
    """A started server with the flood's settings and the victim user, stopped after."""
    server = LiveServer(workdir, **FLOOD_ENV)
    server.set_up_database()
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "User.objects.create_user('victim', password='pw-victim-123')",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def timed_turn(http: httpx.AsyncClient, headers: dict) -> float:
    conversation = (await http.post("/api/v1/conversations", json={}, headers=headers)).json()
    started = time.monotonic()
    result = await http.post(
        f"/api/v1/conversations/{conversation['id']}/messages",
        json={"content": "What time is it?", "wait": 60},
        headers=headers,
    )
    elapsed = time.monotonic() - started
    assert result.json()["status"] == "complete", result.text
    return elapsed


async def drained(http: httpx.AsyncClient, headers: dict, seconds: float = 120) -> None:
    """Waits until none of the user's conversations has a turn running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        states = {
            c["state"] for c in (await http.get("/api/v1/conversations", headers=headers)).json()
        }
        if not states & {"llm_requesting", "tool_executing"}:
            return
        await asyncio.sleep(0.5)
    raise TimeoutError("the flood's turns did not finish")


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment. Seen from the client, a stream the server
    admits in the place of one that closed opens after that one closed."""
    edges = sorted([(opened, 1) for opened, _ in intervals] + [(c, -1) for _, c in intervals])
    most = current = 0
    for _, step in edges:  # at a tie, the close (-1) sorts first
        current += step
        most = max(most, current)
    return most


def flood_scenario(server) -> dict:
    """One user (demo) floods the server with FLOOD_MESSAGES messages at once over 20
    conversations and FLOOD_STREAMS event streams, while another user (victim, who must
    exist) runs a turn of their own: the victim's turn alone and under the flood, in
    seconds, and what the flood got (status codes; the most streams open at once)."""
    victim = {"Authorization": f"Bearer {server.manage('create_api_token', 'victim').strip()}"}
    flooder = {"Authorization": f"Bearer {server.manage('create_api_token', 'demo').strip()}"}

    async def scenario() -> dict:
        # 100 connections at a time: daphne's listen backlog is small, and beyond it the
        # kernel resets connections, which measures the backlog, not Parley.
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as http:
            baseline = min([await timed_turn(http, victim) for _ in range(2)])

            # The limit (20) counts in fixed one-minute windows: 41 requests within a minute
            # put at least 21 in one window, wherever the windows' boundary falls.
            created = []
            for _ in range(41):
                created.append(await http.post("/api/v1/conversations", json={}, headers=flooder))
                if created[-1].status_code == 429:
                    break
            conversations = [r.json()["id"] for r in created if r.status_code == 201]
            refused_conversations = [r for r in created if r.status_code == 429]
            assert 20 <= len(conversations) <= 40 and refused_conversations
            assert all(r.headers["Retry-After"] for r in refused_conversations)

            async def flood_message(n: int) -> int | str:
                cid = conversations[n % len(conversations)]
                try:
                    response = await http.post(
                        f"/api/v1/conversations/{cid}/messages",
                        json={"content": "What time is it?"},
                        headers=flooder,
                    )
                except httpx.TransportError:
                    return "dropped"
                return response.status_code

            open_streams: list[tuple[float, float]] = []  # (opened, closed), client side
            holding: list[int] = []  # the streams admitted so far
            victim_done = asyncio.Event()

            async def flood_stream(n: int) -> int | str:
                cid = conversations[n % len(conversations)]
                url = f"/api/v1/conversations/{cid}/events"
                try:
                    async with http.stream("GET", url, headers=flooder) as stream:
                        if stream.status_code == 200:
                            opened = time.monotonic()
                            holding.append(n)
                            await victim_done.wait()  # held open while the victim's turn runs
                    if stream.status_code == 200:
                        open_streams.append((opened, time.monotonic()))
                    return stream.status_code
                except httpx.TransportError:
                    return "dropped"

            flood = [asyncio.create_task(flood_message(n)) for n in range(FLOOD_MESSAGES)]
            flood += [asyncio.create_task(flood_stream(n)) for n in range(FLOOD_STREAMS)]
            try:
                # The flood has reached the server once it holds a stream open.
                await eventually(lambda: holding, 60, "the flood's first open stream")
                flooded = await timed_turn(http, victim)
            finally:
                victim_done.set()
            statuses = await asyncio.gather(*flood)
            # The baseline once more, with the machine quiet again: a shared machine that
            # slowed down during the flood (3.7x once in CI, 1.1x when run again) slows the
            # baseline as much, and the ratio stays about what the limits let through.
            await drained(http, flooder)
            baseline = max(baseline, await timed_turn(http, victim))
        messages, streams = statuses[:FLOOD_MESSAGES], statuses[FLOOD_MESSAGES:]
        return {
            "baseline": baseline,
            "flooded": flooded,
            "most_open_streams": most_at_once(open_streams),
            "messages": {code: messages.count(code) for code in set(messages)},
            "streams": {code: streams.count(code) for code in set(streams)},
        }

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, scenario()).result()
