"""Load: N concurrent ask-and-answer flows on the multi-process setup: two web processes and
two workers, PostgreSQL (a database of its own, dropped afterwards) and Redis.

Each flow is a person on one of the two web processes (alternately): a new conversation with
its tab open, a message, the agent's question, the answer; measured from the answer's POST to
the tab receiving the completed reply (the final message, rendered). Errors are flows that
failed or timed out. Peak DB connections: pg_stat_activity for the database, sampled. CPU
per flow: the CPU seconds (user and system, /proc) every Parley process (web and worker) spent
while the level's flows ran, divided by the flows: what an operator pays for each answered
question, whatever the machine's number of cores.
"""

import asyncio
import os
import statistics
import threading
import time
from collections.abc import Callable

import psycopg

from bench.client import Person, question_id
from bench.model import FOLLOW_UP, OPTIONS
from bench.servers import REDIS_DB, flush_redis, parley, postgres_database

LEVELS = (1, 10, 30)


def completed(message: str) -> bool:
    """The frame that shows the reply finished: the follow-up rendered as the final message."""
    return FOLLOW_UP in message and "is-draft" not in message


async def flow(person: Person) -> float:
    conversation = await person.new_conversation()
    tab = await person.socket(conversation)
    try:
        await person.say(conversation, "hello")
        index, _ = await tab.wait_for(lambda m: question_id(m) is not None, seconds=60)
        call = question_id(tab.socket.messages[index])
        start = len(tab.socket.messages)
        started = time.time()
        await person.answer(conversation, call, OPTIONS[0])
        _, arrived = await tab.wait_for(completed, seconds=60, start=start)
        return arrived - started
    finally:
        await tab.close()


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user and system) the processes have used so far."""
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            # After the command's name, in parentheses: utime and stime are fields 14 and 15.
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


async def level(
    urls: list[str], n: int, cpu: Callable[[], float] = lambda: 0.0
) -> tuple[list[float], int, float]:
    """The flows' times, the number that failed, and the CPU seconds the servers spent on
    them (`cpu()` before and after)."""
    # Signed in before the flows start: a login's password hashing is not what is measured.
    people = [Person(url) for url in urls]
    for person in people:
        await person.log_in()
    try:
        before = cpu()
        results = await asyncio.gather(
            *(flow(people[i % len(people)]) for i in range(n)), return_exceptions=True
        )
        spent = cpu() - before
    finally:
        for person in people:
            await person.close()
    times = [r for r in results if isinstance(r, float)]
    return times, len(results) - len(times), spent


class ConnectionCounter:
    """Samples the number of connections to one database every 20 ms."""

    def __init__(self, database_url: str) -> None:
        self.name = database_url.rsplit("/", 1)[1]
        self.admin = database_url.rsplit("/", 1)[0] + "/postgres"
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as connection:
            while not self.stop.is_set():
                (count,) = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.name,)
                ).fetchone()
                self.peak = max(self.peak, count)
                time.sleep(0.02)

    def reset(self) -> int:
        peak, self.peak = self.peak, 0
        return peak

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def run(model_url: str) -> dict:
    redis_url = f"redis://127.0.0.1:6379/{REDIS_DB}"
    flush_redis(redis_url)
    results = {}
    with (
        postgres_database() as database_url,
        parley(
            model_url, webs=2, workers=2, database_url=database_url, REDIS_URL=redis_url
        ) as servers,
    ):
        urls = [server.url for server in servers]
        pids = servers.pids()
        asyncio.run(level(urls, 2))  # warm up
        counter = ConnectionCounter(database_url)
        try:
            for n in LEVELS:
                counter.reset()
                times, errors, spent = asyncio.run(level(urls, n, lambda: cpu_seconds(pids)))
                ms = sorted(t * 1000 for t in times)
                results[str(n)] = {
                    "flows": n,
                    "errors": errors,
                    "cpu_ms_per_flow": round(spent * 1000 / n, 1),
                    "p50_ms": round(statistics.median(ms), 1) if ms else None,
                    "p95_ms": round(ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))], 1)
                    if ms
                    else None,
                    "peak_db_connections": counter.reset(),
                }
        finally:
            counter.close()
    flush_redis(redis_url)
    return results


if __name__ == "__main__":
    from bench.model import Model

    print(run(Model().url))
