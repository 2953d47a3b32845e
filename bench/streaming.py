"""Streaming: the websocket bytes one tab receives for a reply of N characters, as a ratio to N.

The model streams word by word at PACE words per second (a fast model's pace); the tab's
bytes are counted from the first frame of the reply (its draft) to the end of the turn. The
tab offers permessage-deflate as browsers do, and two figures are kept: the messages' text
as the page gets it (payload), and the bytes read from the socket, frame headers included
(wire: what the network carries, and what the goal is about). The reply is English prose
(bench/model.py: standard-library docstrings), as compressible as a model's text.
"""

import asyncio
import time

from bench.client import Person
from bench.model import reply_text
from bench.servers import parley

PACE = 200  # words per second
SIZES = (1_000, 10_000, 50_000)


def is_idle(server, conversation_id: int) -> bool:
    rows = server.query("SELECT agent_state FROM chat_conversation WHERE id = %s", conversation_id)
    return rows == [("idle",)]


async def one_reply(server, person: Person, size: int) -> dict:
    conversation = await person.new_conversation()
    tab = await person.socket(conversation, deflate=True)
    assert tab.socket.extensions, "the server did not accept permessage-deflate"
    try:
        await asyncio.sleep(0.2)  # the sync's answer
        start = len(tab.socket.messages)
        await person.say(conversation, f"stream {size}")
        deadline = time.monotonic() + 120
        while not is_idle(server, conversation):
            if time.monotonic() > deadline:
                raise TimeoutError("the reply did not finish")
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the last frames
        frames = tab.socket.messages[start:]
        # The reply's first frame: its draft (made empty as the step starts), or its text.
        first = next(i for i, m in enumerate(frames) if "is-draft" in m or reply_text(5) in m)
        received = sum(len(m.encode()) for m in frames[first:])
        wire = sum(tab.socket.wire_sizes[start + first :])
        return {
            "chars": size,
            "bytes": received,
            "frames": len(frames) - first,
            "ratio": round(received / size, 2),
            "wire_bytes": wire,
            "wire_ratio": round(wire / size, 2),
            "extensions": tab.socket.extensions,
        }
    finally:
        await tab.close()


async def replies(server) -> list[dict]:
    person = Person(server.url)
    await person.log_in()
    try:
        return [await one_reply(server, person, size) for size in SIZES]
    finally:
        await person.close()


def run(model_url: str) -> dict:
    with parley(model_url) as [server]:
        return {"pace_words_per_second": PACE, "replies": asyncio.run(replies(server))}


if __name__ == "__main__":
    from bench.model import Model

    print(run(Model(pace=PACE).url))
