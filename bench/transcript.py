"""Transcript: the time to render a conversation of 1,000 messages, as a page (GET) and as
a websocket catch-up from cursor 0 (the first frame), on one process with SQLite: one of
text only, and one of an agent at work (250 turns, each a tool call, its result and a reply)."""

import asyncio
import statistics
import time

from bench.client import Person
from bench.servers import parley

MESSAGES = 1_000
TRIALS = 3

# Run in the server's environment (manage.py shell): 1,000 messages of the demo user's. Text
# only: user and agent in turn, the agent's with some markdown. With tools: turns of a
# question, a tool call, its result and a reply (each tool card shows its result).
CREATE = """
from django.contrib.auth.models import User
from django.db import transaction
from chat import services, transcript
from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.models import Role
conversation = services.create_conversation(owner=User.objects.get(username="demo"))
reply = "**bold**, `code` and a [link](https://example.com).\\n\\n- one\\n- two"
with transaction.atomic():
    locked = transcript.lock(conversation.pk)
    for i in range({count}):
        if {tools} and i % 4 == 1:
            arguments = {{"expression": f"{{i}}*2"}}
            call = ToolCallBlock(id=f"call_{{i}}", name="calculate", arguments=arguments)
            role, blocks = Role.ASSISTANT, [call]
        elif {tools} and i % 4 == 2:
            result = ToolResultBlock(tool_call_id=f"call_{{i - 1}}", content=str(i * 2 - 2))
            role, blocks = Role.TOOL, [result]
        elif (i % 4 == 3) if {tools} else (i % 2):
            role, blocks = Role.ASSISTANT, [TextBlock(text=f"{prefix}{{i}}: {{reply}}")]
        else:
            role, blocks = Role.USER, [TextBlock(text=f"Q{{i}}")]
        transcript.append_message(locked, role=role, blocks=blocks)
print(conversation.pk)
"""


async def measure(url: str, conversation: int) -> dict:
    person = Person(url)
    await person.log_in()
    page, catch_up, size = [], [], 0
    try:
        for _ in range(TRIALS + 1):
            started = time.perf_counter()
            response = await person.http.get(f"/c/{conversation}/")
            page.append(time.perf_counter() - started)
            size = len(response.content)
            started = time.time()
            tab = await person.socket(conversation, after=0)
            _, arrived = await tab.wait_for(lambda m: "sync-cursor" in m, seconds=60)
            catch_up.append(arrived - started)
            await tab.close()
    finally:
        await person.close()
    return {
        # The first load renders every message's markdown; later ones find it kept.
        "first_page_ms": round(page[0] * 1000, 1),
        "page_ms": round(statistics.median(page[1:]) * 1000, 1),
        "page_bytes": size,
        "catch_up_ms": round(statistics.median(catch_up[1:]) * 1000, 1),
    }


def run(model_url: str) -> dict:
    with parley(model_url) as [server]:

        def create(tools: bool) -> int:
            # Texts of their own: the first page of each renders all its markdown.
            script = CREATE.format(count=MESSAGES, tools=tools, prefix="A" if tools else "R")
            return int(server.manage("shell", "-v", "0", "-c", script).strip())

        text, tools = create(tools=False), create(tools=True)
        return {
            "messages": MESSAGES,
            **asyncio.run(measure(server.url, text)),
            "with_tools": asyncio.run(measure(server.url, tools)),
        }


if __name__ == "__main__":
    from bench.model import Model

    print(run(Model().url))
