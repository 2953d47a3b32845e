"""A person's side of Parley for the benchmarks, over real HTTP and websockets."""

import asyncio
import re
import time

import httpx

from tests.live_clients import WebSocket, log_in

ANSWER_FIELD = "q0"


class Person:
    """One signed-in browser session (cookies, CSRF token) of the demo user."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.AsyncClient(base_url=url, timeout=60)
        self.session = ""

    async def log_in(self) -> None:
        self.session = await log_in(self.http)

    def headers(self) -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies["csrftoken"], "HX-Request": "true"}

    async def new_conversation(self) -> int:
        response = await self.http.post("/conversations/new/", headers=self.headers())
        location = response.headers.get("HX-Redirect") or response.headers["location"]
        return int(re.search(r"/c/(\d+)/", location)[1])

    async def say(self, conversation_id: int, text: str) -> None:
        response = await self.http.post(
            f"/c/{conversation_id}/messages/", data={"text": text}, headers=self.headers()
        )
        response.raise_for_status()

    async def answer(self, conversation_id: int, tool_call_id: str, label: str) -> None:
        response = await self.http.post(
            f"/c/{conversation_id}/questions/{tool_call_id}/answer/",
            data={ANSWER_FIELD: label},
            headers=self.headers(),
        )
        response.raise_for_status()

    async def socket(self, conversation_id: int, after: int = 0, *, deflate: bool = False) -> "Tab":
        """A tab's websocket on the conversation, synced from `after`; with `deflate`, it
        offers permessage-deflate as browsers do."""
        socket = await WebSocket.connect(
            self.url,
            f"/ws/conversations/{conversation_id}/",
            {"Origin": self.url, "Cookie": f"sessionid={self.session}"},
            deflate=deflate,
        )
        socket.send(0x1, f'{{"type": "sync", "after": {after}}}'.encode())
        return Tab(socket)

    async def close(self) -> None:
        await self.http.aclose()


class Tab:
    """An open conversation websocket: what it received, and when."""

    def __init__(self, socket: WebSocket) -> None:
        self.socket = socket

    @property
    def text(self) -> str:
        return "".join(self.socket.messages)

    def bytes_received(self) -> int:
        """The messages' text, as the page gets it (decompressed)."""
        return sum(len(m.encode()) for m in self.socket.messages)

    async def wait_for(self, predicate, seconds: float = 30, start: int = 0) -> tuple[int, float]:
        """The index and arrival time (time.time()) of the first message from `start` on
        for which predicate(message) holds."""
        deadline = time.monotonic() + seconds
        index = start
        while True:
            messages = self.socket.messages
            while index < len(messages):
                if predicate(messages[index]):
                    return index, self.socket.received_at[index]
                index += 1
            if time.monotonic() > deadline:
                raise TimeoutError("the expected websocket message did not come")
            await asyncio.sleep(0.001)

    async def close(self) -> None:
        await self.socket.close()


def question_id(html: str) -> str | None:
    m = re.search(r"/questions/([A-Za-z0-9_-]+)/answer/", html)
    return m[1] if m else None
