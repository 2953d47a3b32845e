"""Isolation: one user's attack against another user's turn or page, and against the process's
memory (the security issue "No user can hurt another", its items 1-4 and 7), with the default
limits.

Each attack runs on one daphne process (tests/live_server.py's LiveServer, through
config.serve) on a PostgreSQL database of its own (a copy of one migrated for the run, with
the users `victim` and `attacker`), the scripted agent at its default pace (a turn of the
victim's, "What time is it?", takes about a second). The victim's time is measured alone
(the baseline: before the attack) and under the attack, as medians; where the limits soon
leave the attacker nothing but refusals (search, regenerate), only the victim's turns or
pages while the attacker's accepted work ran count as under it. The process's resident
memory (VmRSS of the daphne process, read every 50 ms) at the baseline, and its peak during
the attack and the seconds after it. The goal: another user's turn or page stays within 2x
of its time alone, and the process's memory within 64 MB of its baseline.

- webhook_bodies: the attacker's 10 webhooks (the most allowed) lead to a receiver that
  answers 200 with a 1.5 GB body (streamed, never held), while the attacker's questions make
  event after event.
- trickling_receiver: the same, with a receiver that answers a byte a second; the victim's
  question has a 6 s deadline (their own setting): how late it expires, and how late the
  victim's own webhook hears of the question.
- websockets: 300 websockets from the attacker on three conversations whose turns stream;
  how many the process kept (PARLEY_MAX_SOCKETS) and how many it closed with 4429.
- search: the attacker's 3,000 messages of ~19 KB each (written straight to the database),
  then 12 searches at a time, over and over, of phrases that match every message; the
  victim's conversation page (GET /c/<id>/).
- regenerate: 80 Regenerate presses in 30 s over three of the attacker's conversations.
"""

import asyncio
import contextlib
import json
import random
import statistics
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from bench.servers import postgres_database
from tests.live_clients import HandshakeRefused, SignedIn, log_in
from tests.live_clients import run as on_a_thread
from tests.live_server import LiveServer

# The defaults of config/settings.py, which LiveServer otherwise turns off or changes.
DEFAULTS = {
    "PARLEY_MESSAGES_PER_MINUTE": "30",
    "PARLEY_CONVERSATIONS_PER_MINUTE": "20",
    "PARLEY_MAX_RUNNING_TURNS": "3",
    "SCRIPTED_AGENT_DELAY": "0.04",
    "LOG_LEVEL": "WARNING",
}
# What the webhook attacks need besides: a receiver on this machine.
WEBHOOK_ENV = {"WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true"}
PASSWORD = "pw-isolation-123"  # noqa: S105 - the benchmark's own users, in its own database
REPETITIONS = 3  # victim turns (or pages) alone, and under the attack, at least
RATIO_GOAL = 2.0
RSS_GOAL_MB = 64
SETTLE_SECONDS = 2.0  # memory is still watched this long after an attack ends

BODY_BYTES = 1536 * 1024 * 1024  # the webhook_bodies receiver's answer
TRICKLE_SECONDS = 1.0  # the trickling receiver's pause between bytes
WEBHOOKS = 10  # the attacker's webhooks to its receiver: the most one user may register
VICTIM_DEADLINE = 6  # seconds: the victim's questions expire after this (their setting)
SOCKETS = 300
SEARCH_MESSAGES = 3_000
SEARCH_CONVERSATIONS = 30
SEARCH_MESSAGE_CHARS = 19_000
SEARCH_PARALLEL = 12
SEARCH_SECONDS = 15
REGENERATIONS = 80
REGENERATE_SECONDS = 30

# Run in the base database's environment (manage.py shell): the two users, their API tokens,
# and the victim's own deadline for questions.
USERS = """
import json
from django.contrib.auth.models import User
from accounts.models import Preferences
from api.tokens import create_token
tokens = {{}}
for name in ("victim", "attacker"):
    user = User.objects.create_user(name, password={password!r})
    tokens[name] = create_token(user=user, name="bench")[1]
Preferences.objects.update_or_create(user=User.objects.get(username="victim"),
                                     defaults={{"question_expire_after": {deadline}}})
print(json.dumps(tokens))
"""

# The attacker's stored messages, generated: words of a made-up vocabulary, so that each
# message holds many different words (a large tsvector). Written in bulk, as the transcript
# writes them (search_text beside the blocks; PostgreSQL computes search_vector).
SEED = """
import random
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone
from chat.models import Conversation, Message, Role
rng = random.Random(7)
vocabulary = {vocabulary!r}
owner = User.objects.get(username="attacker")
per = {messages} // {conversations}
for c in range({conversations}):
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=owner, title=f"Notes {{c}}", seq=per)
        now = timezone.now()
        rows = []
        for i in range(per):
            text = " ".join(rng.choices(vocabulary, k={words}))[:{chars}]
            rows.append(Message(
                conversation=conversation, role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
                order=i, blocks=[{{"type": "text", "text": text}}], search_text=text,
                created_seq=i + 1, seq=i + 1, created_at=now, updated_at=now))
        Message.objects.bulk_create(rows, batch_size=50)
# As a database that has been running a while has them: the table's statistics and visibility
# map, rather than autovacuum's work on a new 60 MB table during the measurements.
with connection.cursor() as cursor:
    cursor.execute("VACUUM ANALYZE chat_message")
print(Message.objects.filter(conversation__owner=owner).count())
"""


def vocabulary(size: int = 400) -> list[str]:
    """Made-up words of 4 to 9 letters. Few enough that every message holds nearly all of
    them: every search of two of them as a phrase must read every message's tsvector."""
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(letters, k=rng.randint(4, 9))))
    return sorted(words)


def phrase_query(rng: random.Random, words: list[str]) -> str:
    """Phrases of two common words joined by `or`, up to the 200 characters a search may
    have: each phrase makes PostgreSQL check the word positions of every message it finds
    in the index."""
    query = ""
    while True:
        phrase = f'"{rng.choice(words)} {rng.choice(words)}"'
        longer = f"{query} or {phrase}" if query else phrase
        if len(longer) > 200:
            return query
        query = longer


# --- Webhook receivers ------------------------------------------------------------------------


class Receiver:
    """A webhook endpoint on a loopback port (tests/fakes.py's WebhookReceiver needs Django's
    settings in this process): records each event's body and when it came (time.time()),
    and answers 200, with `body_bytes` of body sent 64 KB at a time as long as the client
    reads (`body_sent`: what it took, each answer), or with `trickle`, the status line and
    headers a byte at a time, this many seconds apart."""

    def __init__(self, *, body_bytes: int = 0, trickle: float = 0.0) -> None:
        self.body_bytes, self.trickle = body_bytes, trickle
        self.events: list[tuple[float, dict]] = []
        self.body_sent: list[int] = []
        self.in_flight = self.most_in_flight = 0
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    receiver.events.append((time.time(), json.loads(body)))
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                try:
                    if receiver.trickle:
                        self.trickle_answer()
                    else:
                        self.answer()
                finally:
                    with lock:
                        receiver.in_flight -= 1

            def answer(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(receiver.body_bytes))
                self.end_headers()
                sent, chunk = 0, b"x" * 65536
                try:
                    while sent < receiver.body_bytes:
                        self.wfile.write(chunk[: receiver.body_bytes - sent])
                        sent += min(len(chunk), receiver.body_bytes - sent)
                except OSError:
                    pass  # the client closed the connection
                receiver.body_sent.append(sent)
                self.close_connection = True

            def trickle_answer(self) -> None:
                try:
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(receiver.trickle)
                except OSError:
                    pass  # the client closed the connection
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- Databases, the server, its memory ------------------------------------------------------


@contextlib.contextmanager
def server_on(database_url: str, *, seed: str = "", **env: str):
    """One daphne process with the default limits on a copy of the run's database (`seed`
    run in it first, through manage.py shell), stopped afterwards."""
    with postgres_database(template=database_url.rsplit("/", 1)[1]) as url:
        workdir = Path(tempfile.mkdtemp(prefix="parley-bench-isolation-"))
        server = LiveServer(workdir, database_url=url, **DEFAULTS, **env)
        if seed:
            server.manage("shell", "-v", "0", "-c", seed)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Memory:
    """The daphne process's resident memory: `baseline()` reads it now, and from then on a
    thread reads it every 50 ms, keeping the peak, until `stop()`."""

    def __init__(self, server: LiveServer) -> None:
        self.pid = server.process.pid
        self.base = 0.0
        self.peak = 0.0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def baseline(self) -> None:
        self.base = self.peak = rss_mb(self.pid)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stopped.wait(0.05):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except (OSError, RuntimeError):  # the process ended (the attack failed)
                return

    async def stop(self) -> None:
        await asyncio.sleep(SETTLE_SECONDS)
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, rss_mb(self.pid))

    def figures(self) -> dict:
        return {
            "rss_baseline_mb": round(self.base, 1),
            "rss_peak_mb": round(self.peak, 1),
            "rss_delta_mb": round(self.peak - self.base, 1),
        }


def outcome(
    baseline: list[float],
    attacked: list[tuple[float, float]],
    memory: Memory,
    *,
    during=None,
    **more,
) -> dict:
    """The figures of an attack. `attacked`: (started, seconds) of each of the victim's
    turns or pages while the attack went on (time.monotonic()). With `during`, a predicate
    of (started, seconds), those it holds for are the ones under the attack (REPETITIONS at
    least): the others met an attacker who only got refusals (429). All of them are
    `window_s`."""
    under = [seconds for started, seconds in attacked]
    if during is not None:
        active = [seconds for started, seconds in attacked if during(started, seconds)]
        under = active if len(active) >= REPETITIONS else under[:REPETITIONS]
    alone, median = statistics.median(baseline), statistics.median(under)
    return {
        "baseline_s": round(alone, 3),
        "attacked_s": round(median, 3),
        "ratio": round(median / alone, 2),
        "attacked_max_s": round(max(under), 3),
        "window_s": round(statistics.median(seconds for _, seconds in attacked), 3),
        "repetitions": {"baseline": len(baseline), "attacked": len(under), "window": len(attacked)},
        **memory.figures(),
        **more,
    }


# --- Clients ----------------------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def signed_in(url: str, username: str) -> SignedIn:
    """A browser session of `username` (cookies, CSRF token)."""
    person = SignedIn(url, timeout=120)
    person.session = await log_in(person.http, username, PASSWORD)
    return person


def client(url: str) -> httpx.AsyncClient:
    # 100 connections at a time, as bench/flood.py: beyond daphne's small listen backlog the
    # kernel resets connections, which would measure the backlog, not Parley.
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    return httpx.AsyncClient(base_url=url, timeout=120, limits=limits)


async def victim_turn(http: httpx.AsyncClient, headers: dict, conversation: int) -> float:
    """The seconds of one turn of the victim's ("What time is it?": two steps, two tools)."""
    started = time.monotonic()
    result = await http.post(
        f"/api/v1/conversations/{conversation}/messages",
        json={"content": "What time is it?", "wait": 60},
        headers=headers,
    )
    elapsed = time.monotonic() - started
    assert result.status_code == 200 and result.json()["status"] == "complete", result.text
    return elapsed


async def turns(http: httpx.AsyncClient, headers: dict, count: int) -> list[float]:
    """`count` turns of the victim's, in a conversation of their own."""
    conversation = await new_conversation(http, headers)
    return [await victim_turn(http, headers, conversation) for _ in range(count)]


async def turns_while(
    http: httpx.AsyncClient, headers: dict, task: asyncio.Future
) -> list[tuple[float, float]]:
    """The victim's turns, in a conversation of their own, a second apart (within the
    victim's own limits) for as long as `task` runs, and REPETITIONS at least: when each
    started (time.monotonic()), and its seconds."""
    conversation = await new_conversation(http, headers)
    times = []
    while not task.done() or len(times) < REPETITIONS:
        started = time.monotonic()
        times.append((started, await victim_turn(http, headers, conversation)))
        await asyncio.sleep(1)
    return times


async def new_conversation(http: httpx.AsyncClient, headers: dict) -> int:
    response = await http.post("/api/v1/conversations", json={}, headers=headers)
    response.raise_for_status()
    return response.json()["id"]


async def register_webhook(person: SignedIn, url: str) -> None:
    """Through the Webhooks settings page, as a person does."""
    page = await person.http.get("/settings/webhooks/")
    page.raise_for_status()
    response = await person.http.post(
        "/settings/webhooks/",
        data={"url": url},
        headers={"X-CSRFToken": person.http.cookies["csrftoken"]},
    )
    assert response.status_code == 201, response.text


async def question_events(
    http: httpx.AsyncClient, headers: dict, conversation: int, until: float, got: Counter
) -> None:
    """Ask a question and reject it, again and again, until `until` (time.monotonic()):
    two webhook events a round (question.asked, question.rejected), as fast as the limits
    let the attacker."""
    while time.monotonic() < until:
        response = await http.post(
            f"/api/v1/conversations/{conversation}/messages",
            json={"content": "Choose a pizza", "wait": 30},
            headers=headers,
        )
        got[f"message {response.status_code}"] += 1
        if response.status_code == 429:
            await asyncio.sleep(1)
            continue
        if response.status_code == 200 and response.json()["status"] == "needs_input":
            cancel = await http.post(
                f"/api/v1/conversations/{conversation}/cancel", json={"wait": 30}, headers=headers
            )
            got[f"reject {cancel.status_code}"] += 1


def deliveries(server: LiveServer) -> dict[str, int]:
    rows = server.query(
        "SELECT u.username, d.status, count(*) FROM webhooks_delivery d "
        "JOIN webhooks_webhook w ON w.id = d.webhook_id JOIN auth_user u ON u.id = w.owner_id "
        "GROUP BY 1, 2"
    )
    return {f"{user} {status}": n for user, status, n in rows}


# --- The attacks --------------------------------------------------------------------------------


async def webhook_bodies(server: LiveServer, tokens: dict) -> dict:
    receiver = Receiver(body_bytes=BODY_BYTES)
    victim, attacker = bearer(tokens["victim"]), bearer(tokens["attacker"])
    memory = Memory(server)
    person = await signed_in(server.url, "attacker")
    async with client(server.url) as http:
        for _ in range(WEBHOOKS):
            await register_webhook(person, receiver.url)
        conversations = [await new_conversation(http, attacker) for _ in range(2)]
        baseline = await turns(http, victim, REPETITIONS)
        memory.baseline()
        got: Counter = Counter()
        until = time.monotonic() + 8
        attack = asyncio.gather(
            *(question_events(http, attacker, c, until, got) for c in conversations)
        )
        await asyncio.sleep(1)  # the first deliveries are under way
        attacked = await turns_while(http, victim, attack)
        await attack
        await memory.stop()
    await person.close()
    receiver.close()
    return outcome(
        baseline,
        attacked,
        memory,
        attacker={
            "requests": dict(got),
            "deliveries": deliveries(server),
            "attempts_answered": len(receiver.body_sent),
            "body_offered_mb": BODY_BYTES // 2**20,
            # What the receiver got to write before Parley closed the connection: the
            # socket's buffers, never the body.
            "body_taken_max_mb": round(max(receiver.body_sent, default=0) / 2**20, 1),
        },
    )


async def victim_question(
    server: LiveServer, http: httpx.AsyncClient, headers: dict, receiver: Receiver
) -> dict:
    """The victim asks for a question (which expires after VICTIM_DEADLINE): how late after
    the question was asked the victim's webhook receiver had its question.asked event, and
    how late after its deadline the question expired (the server's own timestamps)."""
    conversation = await new_conversation(http, headers)
    result = await http.post(
        f"/api/v1/conversations/{conversation}/messages",
        json={"content": "Choose a pizza", "wait": 30},
        headers=headers,
    )
    assert result.json()["status"] == "needs_input", result.text

    def heard() -> float | None:
        for at, event in list(receiver.events):
            if event["type"] == "question.asked" and (
                event["data"]["conversationId"] == conversation
            ):
                return at
        return None

    expired = delivered = None
    deadline = time.monotonic() + VICTIM_DEADLINE + 20
    while time.monotonic() < deadline and (expired is None or delivered is None):
        await asyncio.sleep(0.25)
        delivered = heard() if delivered is None else delivered
        if expired is None:
            [(status, expires_at, answered_at, asked_at)] = await asyncio.to_thread(
                server.query,
                "SELECT status, expires_at, answered_at, created_at FROM questions_question "
                "WHERE conversation_id = %s",
                conversation,
            )
            if status != "pending":
                assert status == "expired", status
                expired = (answered_at - expires_at).total_seconds()
    if expired is None:
        raise TimeoutError("the victim's question did not expire")
    if delivered is None:
        # Not within the wait: the victim's question.asked delivery as the outbox has it, and
        # how many pending deliveries were due before it.
        [row] = await asyncio.to_thread(
            server.query,
            "SELECT d.status, d.attempts, (SELECT count(*) FROM webhooks_delivery e "
            "WHERE e.status = 'pending' AND e.next_attempt_at < d.next_attempt_at) "
            "FROM webhooks_delivery d WHERE d.event_type = 'question.asked' "
            "AND d.body::jsonb #>> '{data,conversationId}' = %s",
            str(conversation),
        )
        return {
            "expiry_late_s": round(expired, 2),
            "delivery_s": None,
            "undelivered": {"status": row[0], "attempts": row[1], "due_before_it": row[2]},
        }
    return {
        "expiry_late_s": round(expired, 2),
        "delivery_s": round(delivered - asked_at.timestamp(), 2),
    }


async def trickling_receiver(server: LiveServer, tokens: dict) -> dict:
    trickler, own = Receiver(trickle=TRICKLE_SECONDS), Receiver()
    victim, attacker = bearer(tokens["victim"]), bearer(tokens["attacker"])
    memory = Memory(server)
    people = [await signed_in(server.url, name) for name in ("attacker", "victim")]
    async with client(server.url) as http:
        for _ in range(WEBHOOKS):
            await register_webhook(people[0], trickler.url)
        await register_webhook(people[1], own.url)
        conversations = [await new_conversation(http, attacker) for _ in range(2)]
        question = asyncio.create_task(victim_question(server, http, victim, own))
        baseline = await turns(http, victim, REPETITIONS)
        question_alone = await question
        memory.baseline()
        got: Counter = Counter()
        until = time.monotonic() + 10
        attack = asyncio.gather(
            *(question_events(http, attacker, c, until, got) for c in conversations)
        )
        await asyncio.sleep(2)  # the attacker's deliveries fill their share of the rounds
        question = asyncio.create_task(victim_question(server, http, victim, own))
        attacked = await turns_while(http, victim, attack)
        question_attacked = await question
        await attack
        await memory.stop()
    for person in people:
        await person.close()
    trickler.close()
    own.close()
    return outcome(
        baseline,
        attacked,
        memory,
        deadline_s=VICTIM_DEADLINE,
        expiry_late_s={
            "baseline": question_alone["expiry_late_s"],
            "attacked": question_attacked["expiry_late_s"],
        },
        victim_delivery_s={
            "baseline": question_alone["delivery_s"],
            "attacked": question_attacked["delivery_s"],
        },
        **{
            f"victim_undelivered_{phase}": result["undelivered"]
            for phase, result in (("baseline", question_alone), ("attacked", question_attacked))
            if "undelivered" in result
        },
        attacker={
            "requests": dict(got),
            "deliveries": deliveries(server),
            "most_attempts_at_once": trickler.most_in_flight,
        },
    )


async def open_socket(person: SignedIn, conversation: int, sockets: list) -> str:
    try:
        sockets.append(await person.open_socket(conversation, deflate=True))
    except HandshakeRefused as refused:
        return refused.status_line
    except (OSError, asyncio.IncompleteReadError):
        return "dropped"
    return "opened"


async def streaming(
    http: httpx.AsyncClient, headers: dict, conversation: int, until: float, got: Counter
) -> None:
    """Turn after turn in the conversation, as fast as the limits let the attacker."""
    while time.monotonic() < until:
        response = await http.post(
            f"/api/v1/conversations/{conversation}/messages",
            json={"content": "What time is it?", "wait": 30},
            headers=headers,
        )
        got[response.status_code] += 1
        if response.status_code != 200:
            await asyncio.sleep(0.5)


async def websockets(server: LiveServer, tokens: dict) -> dict:
    victim, attacker = bearer(tokens["victim"]), bearer(tokens["attacker"])
    memory = Memory(server)
    person = await signed_in(server.url, "attacker")
    async with client(server.url) as http:
        conversations = [await new_conversation(http, attacker) for _ in range(3)]
        baseline = await turns(http, victim, REPETITIONS)
        memory.baseline()
        sockets: list = []
        handshakes: Counter = Counter()
        for batch in range(0, SOCKETS, 50):
            handshakes.update(
                await asyncio.gather(
                    *(
                        open_socket(person, conversations[n % 3], sockets)
                        for n in range(batch, min(batch + 50, SOCKETS))
                    )
                )
            )
        await asyncio.sleep(1)  # each socket's sync answered, or the socket closed
        got: Counter = Counter()
        until = time.monotonic() + 6
        attack = asyncio.gather(*(streaming(http, attacker, c, until, got) for c in conversations))
        await asyncio.sleep(0.3)
        attacked = await turns_while(http, victim, attack)
        await attack
        kept = [s for s in sockets if s.close_code is None]
        closes = Counter(str(s.close_code) for s in sockets if s.close_code is not None)
        pushed = sum(len(s.messages) for s in kept)
        for socket in sockets:
            await socket.close()
        await memory.stop()
    await person.close()
    return outcome(
        baseline,
        attacked,
        memory,
        attacker={
            "handshakes": dict(handshakes),
            "kept_open": len(kept),
            "closed": dict(closes),
            "messages_pushed_to_kept": pushed,
            "turns": {str(code): n for code, n in got.items()},
        },
    )


async def page_time(person: SignedIn, conversation: int) -> float:
    started = time.monotonic()
    response = await person.http.get(f"/c/{conversation}/")
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.status_code
    return elapsed


async def search(server: LiveServer, tokens: dict) -> dict:
    victim = bearer(tokens["victim"])
    memory = Memory(server)
    words = vocabulary()
    people = [await signed_in(server.url, name) for name in ("attacker", "victim")]
    attacker, reader = people
    async with client(server.url) as http:
        await turns(http, victim, 1)  # a conversation of the victim's, with one turn
        [mine] = [c["id"] for c in (await http.get("/api/v1/conversations", headers=victim)).json()]
        await page_time(reader, mine)  # the first page of a process renders its templates
        baseline = [await page_time(reader, mine) for _ in range(REPETITIONS + 2)]
        memory.baseline()
        got: Counter = Counter()
        searched: list[tuple[float, float]] = []  # (started, ended) of each search let through
        until = time.monotonic() + SEARCH_SECONDS

        async def searcher(n: int) -> None:
            rng = random.Random(n)
            while time.monotonic() < until:
                started = time.monotonic()
                response = await attacker.http.get(
                    "/conversations/search/",
                    params={"q": phrase_query(rng, words)},
                    headers=attacker.headers(),
                )
                if response.status_code == 200:
                    searched.append((started, time.monotonic()))
                    got["200"] += 1
                elif "took too long" in response.text:
                    got[f"{response.status_code} too slow"] += 1
                else:
                    got[str(response.status_code)] += 1
                if response.status_code == 429:
                    await asyncio.sleep(0.5)

        attack = asyncio.gather(*(searcher(n) for n in range(SEARCH_PARALLEL)))
        attacked = []
        while not attack.done() or len(attacked) < REPETITIONS:
            started = time.monotonic()
            attacked.append((started, await page_time(reader, mine)))
            await asyncio.sleep(0.05)
        await attack
        await memory.stop()
    for person in people:
        await person.close()
    took = [ended - started for started, ended in searched]

    def during(started: float, seconds: float) -> bool:
        """Whether a search let through was under way while the page loaded."""
        return any(s < started + seconds and started < e for s, e in searched)

    return outcome(
        baseline,
        attacked,
        memory,
        during=during,
        attacker={
            "messages": SEARCH_MESSAGES,
            "message_chars": SEARCH_MESSAGE_CHARS,
            "searches": dict(got),
            "search_s_median": round(statistics.median(took), 3) if took else None,
            "search_s_max": round(max(took), 3) if took else None,
        },
    )


async def regenerate(server: LiveServer, tokens: dict) -> dict:
    victim, attacker_token = bearer(tokens["victim"]), bearer(tokens["attacker"])
    memory = Memory(server)
    attacker = await signed_in(server.url, "attacker")
    async with client(server.url) as http:
        conversations = []
        for _ in range(3):  # each with a reply to regenerate
            conversation = await new_conversation(http, attacker_token)
            await http.post(
                f"/api/v1/conversations/{conversation}/messages",
                json={"content": "What time is it?", "wait": 30},
                headers=attacker_token,
            )
            conversations.append(conversation)
        baseline = await turns(http, victim, REPETITIONS)
        memory.baseline()

        last_accepted = 0.0

        async def press(n: int) -> str:
            nonlocal last_accepted
            await asyncio.sleep(n * REGENERATE_SECONDS / REGENERATIONS)
            response = await attacker.http.post(
                f"/c/{conversations[n % 3]}/regenerate/", headers=attacker.headers()
            )
            if response.status_code == 204:
                last_accepted = time.monotonic()
            return str(response.status_code)

        attack = asyncio.gather(*(press(n) for n in range(REGENERATIONS)))
        attacked = await turns_while(http, victim, attack)
        pressed = Counter(await attack)
        await memory.stop()
    await attacker.close()
    return outcome(
        baseline,
        attacked,
        memory,
        # The attacker's turns run until about a turn after the last regeneration let through.
        during=lambda started, _: started < last_accepted + statistics.median(baseline),
        attacker={"regenerations": dict(pressed), "seconds": REGENERATE_SECONDS},
    )


ATTACKS = {
    "webhook_bodies": (webhook_bodies, WEBHOOK_ENV),
    "trickling_receiver": (trickling_receiver, WEBHOOK_ENV),
    "websockets": (websockets, {}),
    "search": (search, {}),
    "regenerate": (regenerate, {}),
}


def within_goals(result: dict) -> bool:
    return result["ratio"] <= RATIO_GOAL and result["rss_delta_mb"] <= RSS_GOAL_MB


def table(results: dict) -> str:
    rows = [
        f"  {'attack':<19} {'alone s':>8} {'attacked s':>10} {'ratio':>6} "
        f"{'RSS MB':>7} {'peak MB':>8} {'delta':>6}  attacker got"
    ]
    for name in ATTACKS:
        r = results[name]
        rows.append(
            f"  {name:<19} {r['baseline_s']:>8} {r['attacked_s']:>10} {r['ratio']:>6} "
            f"{r['rss_baseline_mb']:>7} {r['rss_peak_mb']:>8} {r['rss_delta_mb']:>6}  "
            + json.dumps(r["attacker"], separators=(",", ":"))
        )
    return "\n".join(rows)


def run(model_url: str) -> dict:
    """Every attack, each on a daphne process of its own (the scripted agent answers: the
    benchmark's model is not used)."""
    results: dict = {}
    with postgres_database() as database_url:
        workdir = Path(tempfile.mkdtemp(prefix="parley-bench-isolation-"))
        base = LiveServer(workdir, database_url=database_url)
        base.set_up_database()
        users = USERS.format(password=PASSWORD, deadline=VICTIM_DEADLINE)
        tokens = json.loads(base.manage("shell", "-v", "0", "-c", users))
        for name, (attack, env) in ATTACKS.items():
            began = time.monotonic()
            seed = SEED.format(
                vocabulary=vocabulary(),
                messages=SEARCH_MESSAGES,
                conversations=SEARCH_CONVERSATIONS,
                words=SEARCH_MESSAGE_CHARS // 5,
                chars=SEARCH_MESSAGE_CHARS,
            )
            with server_on(database_url, seed=seed if name == "search" else "", **env) as server:
                results[name] = on_a_thread(attack(server, tokens))
            results[name]["seconds"] = round(time.monotonic() - began, 1)
            r = results[name]
            print(
                f"  {name}: {r['baseline_s']} s -> {r['attacked_s']} s ({r['ratio']}x), "
                f"RSS {r['rss_baseline_mb']} -> {r['rss_peak_mb']} MB "
                f"(+{r['rss_delta_mb']}), {r['seconds']} s",
                flush=True,
            )
    results["within_goals"] = all(within_goals(results[name]) for name in ATTACKS)
    print(table(results), flush=True)
    return results
