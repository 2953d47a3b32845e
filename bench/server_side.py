"""Server side: answer POST -> the first websocket frame of the resumed reply on a second tab.

Each trial: a new conversation, two tabs open on it; the agent asks a question (tab A sees
it); the answer is POSTed, and the time until tab B receives the first frame with the reply's
text is measured. Single process with the in-memory channel layer, and one web process with
one worker over Redis (both on SQLite, so the layer is what differs).

Also the first turn a process runs after it starts (message -> the question shown in tab A),
against the median of the later trials' same step: whatever a process still loads or builds
when its first turn comes (the SDK, its client, its HTTP transport), that turn waits for.
"""

import asyncio
import statistics
import time

from bench.client import Person, question_id
from bench.model import FOLLOW_UP, OPTIONS
from bench.servers import REDIS_DB, flush_redis, parley


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def one_trial(person: Person) -> tuple[float, float]:
    """(message -> question in tab A, answer -> the reply's first words in tab B)"""
    conversation = await person.new_conversation()
    tab_a = await person.socket(conversation)
    tab_b = await person.socket(conversation)
    try:
        said = time.time()
        await person.say(conversation, "hello")
        index, asked = await tab_a.wait_for(lambda m: question_id(m) is not None)
        call = question_id(tab_a.socket.messages[index])
        start_b = len(tab_b.socket.messages)
        started = time.time()
        await person.answer(conversation, call, OPTIONS[0])
        _, arrived = await tab_b.wait_for(lambda m: FOLLOW_UP in m, start=start_b)
        return asked - said, arrived - started
    finally:
        await tab_a.close()
        await tab_b.close()


async def trials(url: str, count: int) -> tuple[float, list[tuple[float, float]]]:
    """The first turn of the process (message -> question), then `count` trials. The first
    trial and two more warm up: imports, connections, templates."""
    person = Person(url)
    await person.log_in()
    try:
        first_turn, _ = await one_trial(person)
        for _ in range(2):
            await one_trial(person)
        return first_turn, [await one_trial(person) for _ in range(count)]
    finally:
        await person.close()


def summary(results: tuple[float, list[tuple[float, float]]], *, first_turn: bool) -> dict:
    """`first_turn`: report the process's first turn too (not where a worker, which nothing
    waits for before the trials begin, may still be starting when it comes)."""
    first, samples = results
    ms = [answered * 1000 for _, answered in samples]
    figures = {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "samples_ms": [round(v, 2) for v in ms],
    }
    if first_turn:
        figures["first_turn_ms"] = round(first * 1000, 1)
        figures["later_turns_ms"] = round(statistics.median(a * 1000 for a, _ in samples), 1)
    return figures


def run(model_url: str, count: int = 25) -> dict:
    results = {}
    with parley(model_url) as [server]:
        results["in_memory"] = summary(asyncio.run(trials(server.url, count)), first_turn=True)
    redis_url = f"redis://127.0.0.1:6379/{REDIS_DB}"
    flush_redis(redis_url)
    with parley(model_url, workers=1, REDIS_URL=redis_url) as [server]:
        results["redis"] = summary(asyncio.run(trials(server.url, count)), first_turn=False)
    flush_redis(redis_url)
    return results


if __name__ == "__main__":
    import json
    import sys

    from bench.model import Model

    model = Model()
    out = run(model.url, int(sys.argv[1]) if len(sys.argv) > 1 else 30)
    for name, s in out.items():
        print(name, s["p50_ms"], s["p99_ms"])
    print(json.dumps({k: {**v, "samples_ms": None} for k, v in out.items()}))
