"""A person's side of Parley for the benchmarks, over real HTTP and websockets."""

import asyncio
import re
import time

from tests.live_clients import SignedIn, WebSocket

ANSWER_FIELD = "q0"


class Person(SignedIn):
    """One signed-in browser session of the demo user, with a tab per open conversation."""

    def __init__(self, url: str) -> None:
        super().__init__(url, timeout=60)

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
        return Tab(await self.open_socket(conversation_id, after=after, deflate=deflate))


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
