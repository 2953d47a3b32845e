"""Transcript: the time to render a conversation of 1,000 messages, as a page (GET) and as
a websocket catch-up from cursor 0 (the first frame), on one process with SQLite: one of
text only, and one of an agent at work (250 turns, each a tool call, its result and a reply).

Flatness: the same for text conversations of 100, 1,000 and 10,000 messages (a page holds the
newest 100; a catch-up from 0 gets that page), and in Chromium the JavaScript heap and DOM
nodes of each one's page once open; the 10,000 figures over the 100 ones (goal: at most 1.5).

And in Chromium, what a streaming reply costs the page: the main thread's time for each
streamed append (the socket's message, its swap and the page's own handlers), on the
1,000-message page and on a new conversation. The model streams at a fast model's pace."""

import asyncio
import statistics
import time

from playwright.sync_api import expect, sync_playwright

from bench.client import Person
from bench.servers import parley
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.pages import log_in, new_conversation, send

MESSAGES = 1_000
LENGTHS = (100, 1_000, 10_000)
TRIALS = 3
STREAMED_CHARS = 3_000  # bench/model.py's `stream <N>`

# Run in the server's environment (manage.py shell): 1,000 messages of the demo user's. Text
# only: user and agent in turn, the agent's with some markdown. With tools: turns of a
# question, a tool call, its result and a reply (each tool card shows its result).
CREATE = """
from django.contrib.auth.models import User
from django.db import transaction
from chat import services
from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.models import Role
from chat.transcript import Transcript, lock
conversation = services.create_conversation(owner=User.objects.get(username="demo"))
reply = "**bold**, `code` and a [link](https://example.com).\\n\\n- one\\n- two"
with transaction.atomic(), Transcript(lock(conversation.pk)) as edit:
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
        edit.append(role=role, blocks=blocks)
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


# Runs before the page's scripts (Playwright's init script; the page's CSP allows no inline
# script): notes when the conversation's socket opens, and times each message of that socket
# from its arrival to the end of the page's handlers (this listener is added after them).
WATCH_APPENDS = """
window.__appends = [];
window.__conversationOpen = false;
let arrived = null;
document.addEventListener("htmx:wsOpen", (event) => {
  if (event.target.closest(".conversation")) { window.__conversationOpen = true; }
});
document.addEventListener("htmx:wsBeforeMessage", () => { arrived = performance.now(); }, true);
window.addEventListener("DOMContentLoaded", () => {
  document.addEventListener("htmx:wsAfterMessage", (event) => {
    if (event.detail.message.startsWith('<div hx-swap-oob="beforeend:#draft-')) {
      window.__appends.push(performance.now() - arrived);
    }
  });
});
"""


def appends_in_browser(url: str, conversation: int) -> dict:
    """Per streamed append, the page's main-thread time: on `conversation`'s page and on a
    new conversation's."""

    def stream(page) -> dict:
        page.wait_for_function("() => window.__conversationOpen")
        send(page, f"stream {STREAMED_CHARS}")
        expect(page.locator(".is-draft")).to_have_count(1, timeout=30_000)
        expect(page.locator(".is-draft")).to_have_count(0, timeout=60_000)
        ms = sorted(page.evaluate("() => window.__appends"))
        return {
            "appends": len(ms),
            "median_ms": round(statistics.median(ms), 2),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
        }

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(base_url=url, locale="en-US").new_page()
        page.add_init_script(WATCH_APPENDS)
        log_in(page)
        page.goto(f"/c/{conversation}/")
        long = stream(page)
        page.goto("/")
        new_conversation(page)
        new = stream(page)
        browser.close()
    return {"chars": STREAMED_CHARS, "long": long, "new": new}


def page_memory(url: str, conversations: dict[int, int]) -> dict[int, dict]:
    """Each conversation's page in Chromium once open, after a garbage collection: the
    JavaScript heap in use and the DOM's nodes (Chrome's Performance metrics, over CDP)."""
    memory = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(base_url=url, locale="en-US").new_page()
        log_in(page)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        for length, conversation in conversations.items():
            page.goto(f"/c/{conversation}/")
            expect(page.get_by_role("list", name="Transcript")).to_be_visible()
            cdp.send("HeapProfiler.collectGarbage")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            memory[length] = {
                "js_heap_mb": round(metrics["JSHeapUsedSize"] / 2**20, 2),
                "dom_nodes": int(metrics["Nodes"]),
            }
        browser.close()
    return memory


def run(model_url: str) -> dict:
    with parley(model_url) as [server]:

        def create(tools: bool, count: int = MESSAGES, prefix: str = "") -> int:
            # Texts of their own: the first page of each renders all its markdown.
            prefix = prefix or ("A" if tools else "R")
            script = CREATE.format(count=count, tools=tools, prefix=prefix)
            return int(server.manage("shell", "-v", "0", "-c", script).strip())

        text, tools = create(tools=False), create(tools=True)
        lengths = {n: create(tools=False, count=n, prefix=f"L{n}-") for n in LENGTHS}
        by_length = {n: asyncio.run(measure(server.url, c)) for n, c in lengths.items()}
        memory = page_memory(server.url, lengths)
        low, high = by_length[LENGTHS[0]], by_length[LENGTHS[-1]]
        return {
            "messages": MESSAGES,
            **asyncio.run(measure(server.url, text)),
            "with_tools": asyncio.run(measure(server.url, tools)),
            "lengths": {str(n): {**by_length[n], **memory[n]} for n in LENGTHS},
            # The longest transcript's figures over the shortest's (goal: at most 1.5).
            "flatness": {
                "page": round(high["page_ms"] / low["page_ms"], 2),
                "catch_up": round(high["catch_up_ms"] / low["catch_up_ms"], 2),
                "js_heap": round(
                    memory[LENGTHS[-1]]["js_heap_mb"] / memory[LENGTHS[0]]["js_heap_mb"], 2
                ),
            },
            "streamed_appends": appends_in_browser(server.url, text),
        }


if __name__ == "__main__":
    from bench.model import Model
    from bench.streaming import PACE

    print(run(Model(pace=PACE).url))
