"""What an approval costs in latency over a plain tool call.

One process as `make run` serves it (in-memory layer, SQLite), with the example notes server
(examples/notes_server.py) connected twice over stdio: as `asks`, whose `write_note` needs an
approval (the default for a tool that is not read-only), and as `runs`, whose operator setting
lets every tool run at once. The model (bench/model.py) calls the same `write_note` on either.

- plain: the message sent → the reply after the tool's result, on the conversation's
  websocket (a tab).
- approval: the message sent → the approval shown in the tab, then Allow pressed → the reply
  after the tool's result in the tab. The person's own time between the two is not counted.

The cost is the approval's two spans, summed, less the plain call's: the time Parley adds to
a call for asking, apart from the person's thinking.
"""

import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.client import Person
from bench.model import FOLLOW_UP
from bench.servers import parley

NOTES_SERVER = Path(__file__).resolve().parent.parent / "examples" / "notes_server.py"


def decide_id(html: str) -> str | None:
    m = re.search(r"/questions/([A-Za-z0-9_-]+)/decide/", html)
    return m[1] if m else None


def call(server: str, n: int) -> str:
    arguments = {"name": f"bench-{server}-{n}", "text": "Measured."}
    return f"call mcp__{server}__write_note {json.dumps(arguments)}"


async def plain(person: Person, n: int) -> float:
    conversation = await person.new_conversation()
    tab = await person.socket(conversation)
    try:
        said = time.time()
        await person.say(conversation, call("runs", n))
        _, replied = await tab.wait_for(lambda m: FOLLOW_UP in m)
        return replied - said
    finally:
        await tab.close()


async def approved(person: Person, n: int) -> tuple[float, float]:
    """(message → approval shown, Allow → reply after the tool's result)"""
    conversation = await person.new_conversation()
    tab = await person.socket(conversation)
    try:
        said = time.time()
        await person.say(conversation, call("asks", n))
        index, asked = await tab.wait_for(lambda m: decide_id(m) is not None)
        tool_call_id = decide_id(tab.socket.messages[index])
        start = len(tab.socket.messages)
        allowed = time.time()
        response = await person.http.post(
            f"/c/{conversation}/questions/{tool_call_id}/decide/",
            data={"decision": "allow"},
            headers=person.headers(),
        )
        response.raise_for_status()
        _, replied = await tab.wait_for(lambda m: FOLLOW_UP in m, start=start)
        return asked - said, replied - allowed
    finally:
        await tab.close()


async def trials(url: str, count: int) -> tuple[list[float], list[tuple[float, float]]]:
    """`count` of each, alternating, after three of each to warm up (the servers' first
    connection, imports, templates)."""
    person = Person(url)
    await person.log_in()
    try:
        for n in range(3):
            await plain(person, n)
            await approved(person, n)
        plains, approvals = [], []
        for n in range(3, 3 + count):
            plains.append(await plain(person, n))
            approvals.append(await approved(person, n))
        return plains, approvals
    finally:
        await person.close()


def ms(values) -> float:
    return round(statistics.median(values) * 1000, 1)


def run(model_url: str, count: int = 20) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-approval-"))
    entry = {"command": sys.executable, "args": [str(NOTES_SERVER)]}
    entry["env"] = {"NOTES_DIR": str(workdir / "notes")}
    config = workdir / "mcp.json"
    config.write_text(
        json.dumps(
            {"mcpServers": {"asks": entry, "runs": {**entry, "approval": {"default": "allow"}}}}
        )
    )
    with parley(model_url, MCP_CONFIG=str(config)) as [server]:
        plains, approvals = asyncio.run(trials(server.url, count))
    asked = [a for a, _ in approvals]
    resumed = [r for _, r in approvals]
    totals = [a + r for a, r in approvals]
    return {
        "n": count,
        "plain_ms": ms(plains),
        "asked_ms": ms(asked),
        "resumed_ms": ms(resumed),
        "approval_ms": ms(totals),
        "cost_ms": round(ms(totals) - ms(plains), 1),
        "samples_ms": {
            "plain": [round(v * 1000, 1) for v in plains],
            "asked": [round(v * 1000, 1) for v in asked],
            "resumed": [round(v * 1000, 1) for v in resumed],
        },
    }


if __name__ == "__main__":
    from bench.model import Model

    model = Model()
    out = run(model.url, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
    print(json.dumps({**out, "samples_ms": None}, indent=2))
