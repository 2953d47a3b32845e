"""Transcript: the time to render a conversation of 1,000 messages, as a page (GET) and as
a websocket catch-up from cursor 0 (the first frame), on one process with SQLite."""

import asyncio
import statistics
import time

from bench.client import Person
from bench.servers import parley

MESSAGES = 1_000
TRIALS = 3

# Run in the server's environment (manage.py shell): 1,000 messages, user and agent in turn,
# the agent's with some markdown.
CREATE = """
from django.contrib.auth.models import User
from django.db import transaction
from chat import services, transcript
from chat.blocks import TextBlock
from chat.models import Role
conversation = services.create_conversation(owner=User.objects.get(username="demo"))
reply = "**bold**, `code` and a [link](https://example.com).\\n\\n- one\\n- two"
with transaction.atomic():
    locked = transcript.lock(conversation.pk)
    for i in range({count}):
        odd = i % 2
        role, text = (Role.ASSISTANT, f"R{{i}}: {{reply}}") if odd else (Role.USER, f"Q{{i}}")
        transcript.append_message(locked, role=role, blocks=[TextBlock(text=text)])
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
        "messages": MESSAGES,
        "page_ms": round(statistics.median(page[1:]) * 1000, 1),
        "page_bytes": size,
        "catch_up_ms": round(statistics.median(catch_up[1:]) * 1000, 1),
    }


def run(model_url: str) -> dict:
    with parley(model_url) as [server]:
        conversation = int(
            server.manage("shell", "-v", "0", "-c", CREATE.format(count=MESSAGES)).strip()
        )
        return asyncio.run(measure(server.url, conversation))


if __name__ == "__main__":
    from bench.model import Model

    print(run(Model().url))
