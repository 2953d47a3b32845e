"""Benchmark: the agent runtime's own overhead per step, with the scripted provider.

Measures, for turns of the demo script's two-tool question (two model steps per turn):
- step -> next request: from the provider's last byte to the next model request
  (storing the answer, running both tools, storing their results, rebuilding the history);
- step -> UI push: from the provider's last byte of the final step to the moment the
  conversation's websocket group receives the event that the turn is over.
It also times one streamed-text write, so the figures can be read as ratios on any machine.

    make bench        (or: .venv/bin/python scripts/bench_runtime.py --turns 40
                       --database-url postgres://postgres@127.0.0.1:5432/scratch)

It migrates and writes to the database it is given: by default a new SQLite file in a
temporary folder; give it only a scratch database.
"""

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-"))
    os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ.setdefault("SECRET_KEY", "parley-benchmark")
    os.environ["SCRIPTED_AGENT_DELAY"] = "0"
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

    import django

    django.setup()
    logging.getLogger("parley").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    asyncio.run(bench(args.turns))


async def bench(turn_count: int) -> None:
    from channels.db import database_sync_to_async as db
    from channels.layers import get_channel_layer
    from django.contrib.auth.models import User

    from chat import runtime, services, turns
    from chat.events import conversation_group
    from chat.models import AgentState
    from chat.providers.scripted import ScriptedProvider
    from tests.factories import set_state

    marks: list[tuple[str, float]] = []

    class TimedProvider(ScriptedProvider):
        async def stream(self, *, history, tools):
            marks.append(("request", time.perf_counter()))
            async for event in super().stream(history=history, tools=tools):
                yield event
            marks.append(("last_byte", time.perf_counter()))

    provider = TimedProvider()
    runtime.get_provider = lambda: provider
    layer = get_channel_layer()
    user = await db(User.objects.create_user)(username=f"bench{time.time_ns()}")

    to_next_request: list[float] = []
    to_push: list[float] = []
    for _ in range(turn_count):
        conversation = await db(services.create_conversation)(owner=user)
        channel = await layer.new_channel()
        await layer.group_add(conversation_group(conversation.pk), channel)
        marks.clear()
        received: dict[int, float] = {}
        arrived = asyncio.Event()

        async def listen(channel=channel, received=received, arrived=arrived):
            while True:
                event = await layer.receive(channel)
                received[event["seq"]] = time.perf_counter()
                arrived.set()

        listener = asyncio.create_task(listen())
        # Post without starting a runner (no server loop here), then run the turn directly.
        await db(services.post_user_message)(
            user=user, conversation_id=conversation.pk, text="What time is it?"
        )
        await runtime.run_turn(conversation.pk)
        await db(conversation.refresh_from_db)()
        assert conversation.agent_state == AgentState.IDLE
        while True:
            arrived.clear()
            if conversation.seq in received:
                break
            await arrived.wait()
        listener.cancel()
        finished_at = received[conversation.seq]
        requests = [t for kind, t in marks if kind == "request"]
        last_bytes = [t for kind, t in marks if kind == "last_byte"]
        to_next_request.extend(r - b for b, r in zip(last_bytes, requests[1:], strict=False))
        to_push.append(finished_at - last_bytes[-1])

    # One streamed-text write, as the unit of comparison.
    conversation = await db(services.create_conversation)(owner=user)
    await db(set_state)(conversation.pk, AgentState.LLM_REQUESTING)
    lease = (await db(turns.claim)(conversation.pk)).lease
    writes = []
    for index in range(200):
        started = time.perf_counter()
        await db(turns.stream_text)(lease, f"word {index}")
        writes.append(time.perf_counter() - started)

    write = statistics.median(writes)

    def row(name: str, values: list[float]) -> str:
        ordered = sorted(values)
        p90 = ordered[int(len(ordered) * 0.9) - 1]
        median = statistics.median(values)
        return (
            f"{name:<34} median {median * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms   "
            f"= {median / write:5.1f} x one write   (n={len(values)})"
        )

    from django.db import connection

    print(f"Parley runtime overhead per agent step ({connection.vendor}, scripted provider)")
    print(row("one streamed-text write", writes))
    print(row("last byte -> next model request", to_next_request))
    print(row("last byte -> turn-over push", to_push))


if __name__ == "__main__":
    main()
