"""Server side: answer POST -> the first websocket frame of the resumed reply on a second tab.

Each trial: a new conversation, two tabs open on it; the agent asks a question (tab A sees
it); the answer is POSTed, and the time until tab B receives the first frame with the reply's
text is measured. Single process with the in-memory channel layer, and one web process with
one worker over Redis (both on SQLite, so the layer is what differs).
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


async def one_trial(person: Person) -> float:
    conversation = await person.new_conversation()
    tab_a = await person.socket(conversation)
    tab_b = await person.socket(conversation)
    try:
        await person.say(conversation, "hello")
        index, _ = await tab_a.wait_for(lambda m: question_id(m) is not None)
        call = question_id(tab_a.socket.messages[index])
        start_b = len(tab_b.socket.messages)
        started = time.time()
        await person.answer(conversation, call, OPTIONS[0])
        _, arrived = await tab_b.wait_for(lambda m: FOLLOW_UP in m, start=start_b)
        return arrived - started
    finally:
        await tab_a.close()
        await tab_b.close()


async def trials(url: str, count: int) -> list[float]:
    person = Person(url)
    await person.log_in()
    try:
        for _ in range(3):  # warm up: imports, connections, templates
            await one_trial(person)
        return [await one_trial(person) for _ in range(count)]
    finally:
        await person.close()


def summary(samples: list[float]) -> dict:
    ms = [s * 1000 for s in samples]
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "samples_ms": [round(v, 2) for v in ms],
    }


def run(model_url: str, count: int = 25) -> dict:
    results = {}
    with parley(model_url) as [server]:
        results["in_memory"] = summary(asyncio.run(trials(server.url, count)))
    redis_url = f"redis://127.0.0.1:6379/{REDIS_DB}"
    flush_redis(redis_url)
    with parley(model_url, workers=1, REDIS_URL=redis_url) as [server]:
        results["redis"] = summary(asyncio.run(trials(server.url, count)))
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
