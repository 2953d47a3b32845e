"""The API against a real daphne server: a curl-style session, server-sent events that
disconnect and resume, the terminal client in a pseudo-terminal, and schemathesis."""

import io
import json
import re
import subprocess
import sys
from http.client import HTTPConnection

import httpx
import pexpect
import pytest

from tests.live_server import ROOT, LiveServer, run_isolated

pytestmark = pytest.mark.live

PIZZA = "Which pizza should I order for the team?"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("api"), SCRIPTED_AGENT_DELAY="0.02")
    server.set_up_database()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token(server):
    return server.manage("create_api_token", "demo").strip()


@pytest.fixture
def http(server, token):
    with httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        yield client


def test_a_whole_question_round_trip_over_plain_http(http):
    conversation = http.post("/conversations", json={"title": "curl"}).json()
    asked = http.post(
        f"/conversations/{conversation['id']}/messages", json={"content": "pizza", "wait": 20}
    ).json()
    assert asked["status"] == "needs_input"
    assert asked["pendingQuestion"]["question"] == PIZZA
    done = http.post(
        f"/conversations/{conversation['id']}/respond",
        json={"answers": {PIZZA: "Funghi"}, "wait": 20},
    ).json()
    assert done["status"] == "complete"
    assert done["response"] == "Great, ordering: **Funghi**."


def read_events(lines, until):
    """Parse SSE lines from an open stream until `until(event, data)` is true."""
    events, event, event_id = [], None, None
    for line in lines:
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("id: "):
            event_id = int(line.removeprefix("id: "))
        elif line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
            events.append((event, event_id, data))
            if until(event, data):
                return events
    raise AssertionError(f"the stream ended early: {events}")


def test_events_stream_then_resume_with_last_event_id_without_gaps(http):
    conversation = http.post("/conversations", json={}).json()
    events_url = f"/conversations/{conversation['id']}/events"
    with http.stream("GET", events_url) as stream:
        lines = stream.iter_lines()
        [(_, first_id, data)] = read_events(lines, lambda e, d: e == "state_change")
        assert (data["state"], first_id) == ("idle", conversation["seq"])
        http.post(f"/conversations/{conversation['id']}/messages", json={"content": "pizza"})
        seen = read_events(
            lines, lambda e, d: e == "state_change" and d["state"] == "awaiting_user"
        )
    waiting = seen[-1][2]
    assert waiting["status"] == "needs_input"
    assert waiting["pendingQuestion"]["questions"][0]["question"] == PIZZA
    assert any(event == "text" for event, _, _ in seen)
    ids = [event_id for _, event_id, _ in seen if event_id is not None]
    assert ids == sorted(ids)
    last_id = ids[-1]

    # While nobody listens, the question is answered and the agent finishes.
    http.post(
        f"/conversations/{conversation['id']}/respond",
        json={"answers": {PIZZA: "Pepperoni"}, "wait": 20},
    )
    with http.stream("GET", events_url, headers={"Last-Event-ID": str(last_id)}) as stream:
        resumed = read_events(
            stream.iter_lines(), lambda e, d: e == "state_change" and d["state"] == "idle"
        )
    messages = {d["id"]: d for e, _, d in seen + resumed if e == "message"}
    detail = http.get(f"/conversations/{conversation['id']}").json()
    assert sorted(messages) == [m["id"] for m in detail["messages"]]
    assert messages[max(messages)]["text"] == "Great, ordering: **Pepperoni**."
    resumed_ids = [event_id for _, event_id, _ in resumed if event_id is not None]
    assert resumed_ids and min(resumed_ids) > last_id


def test_the_terminal_client_answers_with_arrow_keys(server, token):
    child = pexpect.spawn(
        sys.executable,
        ["manage.py", "chat", "--server", server.url, "--token", token],
        cwd=str(ROOT),
        env=server.env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 120),
    )
    try:
        child.expect("> ")
        child.sendline("pizza")
        child.expect("Which pizza should I order for the team")
        child.expect("Margherita")
        child.send("\x1b[B")  # arrow down: Pepperoni
        child.send("\r")
        # Markdown is rendered (bold), not printed raw.
        child.expect(r"Great, ordering: (\x1b\[[0-9;]*m)*Pepperoni")
        assert "**" not in child.before + child.after
        child.expect("> ")
        child.sendline("delete")
        child.expect(r"Delete 23 unused test files")
        child.send("y")
        child.expect(r"You answered (\x1b\[[0-9;]*m)*yes")
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def latest_reply(http) -> str:
    """The newest message of the conversation last active, as the server stored it."""
    latest = http.get("/conversations").json()[0]["id"]
    return http.get(f"/conversations/{latest}").json()["messages"][-1]["text"]


def test_the_terminal_client_answers_one_choice_with_its_number_key(server, token, http):
    child = spawn_chat(server, token, "--new")
    try:
        child.expect("> ")
        child.sendline("pizza")
        child.expect("Which pizza should I order for the team")
        child.expect_exact("(1-4 to answer, or arrow keys and Enter)")
        child.expect_exact("4) Other…")  # "Other…" has the next number, as on the page
        child.send("2")  # answers at once, as the page's number keys do
        child.expect(r"Great, ordering: (\x1b\[[0-9;]*m)*Pepperoni")
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert latest_reply(http) == "Great, ordering: **Pepperoni**."


def test_the_terminal_client_ticks_several_choices_with_number_keys(server, token, http):
    child = spawn_chat(server, token, "--new")
    try:
        child.expect("> ")
        child.sendline("toppings")
        child.expect("Which extra toppings do you want")
        child.expect_exact("(1-5 or Space to tick, Enter to confirm)")
        child.expect_exact("5) Other…")
        child.send("1")
        child.send("3")
        child.send("\r")
        child.expect("Adding these toppings")
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert latest_reply(http) == "Adding these toppings:\n\n- Olives\n- Peppers"


def test_the_terminal_client_without_a_terminal_numbers_the_choices(server, token, http):
    output = run_chat(server, token, typed="toppings\n1,3\n").stdout
    assert "  1) Olives" in output
    assert "Adding these toppings:\n\n- Olives\n- Peppers" in output
    # The answer is recorded as given through the terminal (the client says so in a header).
    # The client carried on in the conversation it was last in: its last question is this one.
    latest = http.get("/conversations").json()[0]["id"]
    *_, extra = [
        block["extra"]
        for message in http.get(f"/conversations/{latest}").json()["messages"]
        for block in message["blocks"]
        if block.get("action_type") == "question_request"
    ]
    assert (extra["answeredBy"], extra["answeredVia"]) == ("demo", "terminal")


HOSTILE_TEXT = (
    "Plain \x1b[2J\x1b[Hcleared? \x1b]52;c;ZXZpbA==\x07clip "
    "\x1b]8;;http://evil.example/\x1b\\here\x1b]8;;\x1b\\ and [a link](http://example.com/x) "
    "with **bold** \u202eevil\u202c done."
)
HOSTILE_SCRIPT = f"""
[[rules]]
match = "escape"

[[rules.steps]]
text = "Checking."
tool_calls = [{{ name = "calculate", arguments = {{ expression = "6 * 7" }} }}]

[[rules.steps]]
text = {json.dumps(HOSTILE_TEXT)}
"""
# What must never reach the terminal from the agent's text: erase display, OSC 52 (clipboard),
# OSC 8 (hidden hyperlink), and the bidi override.
CONTROL = ["\x1b[2J", "\x1b]52", "\x1b]8;", "\u202e"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    script = root / "script.toml"
    script.write_text(HOSTILE_SCRIPT)
    server = LiveServer(root, SCRIPTED_AGENT_DELAY="0.01", SCRIPTED_AGENT_SCRIPT=str(script))
    server.set_up_database()
    server.start()
    yield server, server.manage("create_api_token", "demo").strip()
    server.stop()


def run_chat(server, token, *args, typed=""):
    """`manage.py chat` without a terminal (a pipe), given `typed` as its input; it must
    exit cleanly."""
    result = subprocess.run(
        [sys.executable, "manage.py", "chat", "--server", server.url, "--token", token, *args],
        cwd=ROOT,
        env=server.env,
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


def spawn_chat(server, token, *args):
    return pexpect.spawn(
        sys.executable,
        ["manage.py", "chat", "--server", server.url, "--token", token, *args],
        cwd=str(ROOT),
        env=server.env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 120),
    )


def test_the_terminal_client_never_prints_control_sequences_and_shows_tool_use(hostile):
    server, token = hostile
    child = spawn_chat(server, token, "--new")
    try:
        child.expect("> ")
        child.sendline("escape")
        child.expect("calculate")  # the tool call, then its result
        child.expect("42")
        child.expect("done")
        child.expect("> ")
        seen = child.before
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    for sequence in CONTROL:
        assert sequence not in seen, sequence
    assert "cleared?" in seen and "clip" in seen and "evil" in seen
    assert "http://example.com/x" in seen  # a link is shown with its address
    assert "**bold**" not in seen


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def screen_lines(output: str) -> list[str]:
    """The lines a terminal shows of `output`: each line as its last redraw (a carriage return
    starts it over) left it, without colours."""
    return [ANSI.sub("", line.split("\r")[-1]).rstrip() for line in output.split("\r\n")]


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """A server whose scripted agent writes slowly enough that a step's tool calls are stored
    while its text still streams to the terminal."""
    server = LiveServer(tmp_path_factory.mktemp("slow"), SCRIPTED_AGENT_DELAY="0.1")
    server.set_up_database()
    server.start()
    yield server, server.manage("create_api_token", "demo").strip()
    server.stop()


def test_the_terminal_client_prints_each_line_once_around_tool_calls(slow):
    server, token = slow
    child = spawn_chat(server, token, "--new")
    try:
        child.expect("> ")
        child.logfile_read = io.StringIO()
        child.sendline("What time is it? Use your tools.")
        child.expect("Two tools, one turn")
        child.expect("> ")
        seen = child.logfile_read.getvalue()
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    lines = [line for line in screen_lines(seen) if line and line != "parley:"]
    assert len(lines) == len(set(lines)), lines
    first = "Let me check the clock and do the arithmetic."
    # The step's text, whole, then its calls and their results.
    assert lines.index(first) < lines.index('  ⚙ current_time {"timezone": "UTC"}')
    assert not any(line != first and line.startswith("Let me") for line in lines), lines


def test_the_terminal_clients_help_needs_no_secret_key_and_says_every_default(tmp_path):
    result = run_isolated(["manage.py", "chat", "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    flags = re.split(r"\n  (?=-)", result.stdout.split("options:", 1)[1])[1:]
    assert {flag.split()[0].rstrip(",") for flag in flags} == {
        "-h", "--server", "--token", "--conversation", "--new", "--list", "--title",
    }  # fmt: skip
    for flag in flags:
        if not flag.startswith("-h"):
            text = " ".join(flag.split())
            assert "Default:" in text, text
            assert "$PARLEY_" in text or "No environment variable" in text, text
    assert "$PARLEY_SERVER" in result.stdout and "$PARLEY_TOKEN" in result.stdout


def test_without_a_secret_key_a_command_still_refuses_to_run(tmp_path):
    result = run_isolated(["manage.py", "chat", "--list"], tmp_path)
    assert result.returncode != 0
    assert "Set SECRET_KEY" in result.stderr


def test_the_terminal_client_says_invalid_or_revoked_token_on_401(server):
    child = spawn_chat(server, "parley_not-a-real-token")
    try:
        child.expect("invalid or revoked token")
        child.expect(pexpect.EOF)
        output = child.before
    finally:
        child.close(force=True)
    assert child.exitstatus == 1
    assert "Traceback" not in output and "CSRF" not in output


def test_the_terminal_client_lists_resumes_and_starts_only_when_asked(server, token, http):
    before = len(http.get("/conversations").json())
    # Without --new it continues the latest conversation: no new one per run.
    for _ in range(2):
        child = spawn_chat(server, token)
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()
    after = len(http.get("/conversations").json())
    assert after == max(before, 1)

    waiting = http.post("/conversations", json={"title": "Lunch"}).json()
    asked = http.post(
        f"/conversations/{waiting['id']}/messages", json={"content": "pizza", "wait": 20}
    ).json()
    assert asked["status"] == "needs_input"
    listing = run_chat(server, token, "--list").stdout
    [line] = [row for row in listing.splitlines() if "Lunch" in row]
    assert line.startswith("*") and str(waiting["id"]) in line

    child = spawn_chat(server, token, "--conversation", str(waiting["id"]))
    try:
        child.expect(PIZZA)  # the pending question, asked at once
        child.send("\r")  # the first option
        child.expect(r"Great, ordering: (\x1b\[[0-9;]*m)*Margherita")
        child.expect("> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_the_numbered_prompt_asks_again_on_bad_input(server, token):
    result = run_chat(server, token, "--new", typed="pizza\n9\n2\ndelete\nmaybe\ny\n")
    assert "There is no option 9: choose 1-3." in result.stdout
    assert "Choose by number, 1-2." in result.stdout  # a confirmation takes no typed answer
    assert "Great, ordering: **Pepperoni**." in result.stdout  # a pipe gets plain text
    assert "You answered **yes**." in result.stdout  # "y" answers a confirmation
    assert "Traceback" not in result.stderr


def raw_request(server, method, path, headers, body=b"", chunked=False):
    """One request with exactly these header bytes (http.client sends bytes as they are)."""
    connection = HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if chunked:
            connection.putheader("Transfer-Encoding", "chunked")
            connection.endheaders()
            for start in range(0, len(body), 64 * 1024):
                piece = body[start : start + 64 * 1024]
                connection.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            connection.send(b"0\r\n\r\n")
        else:
            if body:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body or None)
        response = connection.getresponse()
        kind = response.getheader("Content-Type", "")
        # An event stream that was accepted goes on forever: its headers are the answer.
        body = b"" if kind.startswith("text/event-stream") else response.read(2000)
        return response.status, kind, body
    finally:
        connection.close()


def test_bad_headers_and_bodies_get_clean_errors_never_a_500(server, token, http):
    conversation = http.post("/conversations", json={}).json()
    base = f"/api/v1/conversations/{conversation['id']}"
    auth = {"Authorization": f"Bearer {token}".encode()}
    hostile_headers = [
        {"Last-Event-ID": "²".encode()},
        {"Last-Event-ID": b"9" * 5000},
        {"Last-Event-ID": b"\xff\xfe"},
        {"Accept-Language": b"\xff;q=x, zz-\x00"},
        {"X-Request-ID": b"\xe2\x80\xae" * 50},
        {"Content-Type": b"application/json; charset=\xff"},
    ]
    for extra in hostile_headers:
        status, kind, body = raw_request(server, "GET", f"{base}/events", {**auth, **extra})
        # 400 with no body: daphne refuses a header holding NUL before Parley sees it.
        assert status in (200, 400, 422), (extra, status, body)
        if status == 422:
            assert kind.startswith("application/json") and b"message" in body
    for bad_auth in [b"Bearer \xff\xfe", b"Bearer parley_" + b"x" * 5000, b"Basic \x01"]:
        status, kind, _ = raw_request(
            server, "GET", "/api/v1/conversations", {"Authorization": bad_auth}
        )
        assert status == 401 and kind.startswith("application/json")

    big = json.dumps({"content": "x" * (300 * 1024)}).encode()
    json_type = {"Content-Type": b"application/json"}
    for path in ["/api/v1/conversations", f"{base}/messages", f"{base}/respond"]:
        status, kind, body = raw_request(server, "POST", path, {**auth, **json_type}, big)
        assert status == 413 and kind.startswith("application/json"), (path, status, body)
        # Chunked: no length up front; still a clean answer, never a 500.
        status, kind, body = raw_request(
            server, "POST", path, {**auth, **json_type}, big, chunked=True
        )
        assert status < 500 and kind.startswith("application/json"), (path, status, body)
    # NUL and lone surrogates in every text field that is stored.
    for path, body in [
        ("/api/v1/conversations", {"title": "a\x00b\ud800"}),
        (f"{base}/messages", {"content": "a\x00b\udfff"}),
        (f"{base}/respond", {"answers": {"q\x00": "\ud800"}}),
    ]:
        encoded = json.dumps(body).encode()  # \u0000 and \ud800 escapes: valid JSON
        status, kind, reply = raw_request(server, "POST", path, {**auth, **json_type}, encoded)
        assert status < 500 and kind.startswith("application/json"), (path, status, reply)


def test_schemathesis_finds_no_server_error(server, token):
    result = subprocess.run(
        [
            *(sys.executable, "-m", "schemathesis.cli", "run", f"{server.url}/api/v1/openapi.json"),
            *("--header", f"Authorization: Bearer {token}"),
            *("--checks", "not_a_server_error"),
            *("--exclude-path-regex", "/events$"),
            *("--max-examples", "25"),
            "--no-color",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


# A conversation longer than a page, with one superseded reply; prints its id.
LONG = """
from django.contrib.auth.models import User
from chat import services
from chat.models import Role
from tests.factories import add_message
conversation = services.create_conversation(owner=User.objects.get(username="demo"), title="Long")
for n in range(75):
    add_message(conversation.pk, f"question {n}", role=Role.USER)
    add_message(conversation.pk, f"answer {n}")
conversation.messages.filter(order=147).update(superseded=True)
print(conversation.pk)
"""


def test_the_terminal_client_opens_a_long_conversation_on_its_newest_messages(server, token):
    long = server.manage("shell", "-v", "0", "-c", LONG).strip()
    short = server.manage("shell", "-v", "0", "-c", LONG.replace("range(75)", "range(2)")).strip()

    output = run_chat(server, token, "--conversation", long).stdout
    lines = output.splitlines()
    assert lines[1] == "(Earlier messages are not shown: the browser has them all.)"
    # The newest 20 messages that are not superseded: answer 64 to answer 74, but answer 73.
    assert "> question 64" not in lines and "answer 64" in lines
    assert lines.index("answer 64") < lines.index("> question 74") < lines.index("answer 74")
    assert "answer 73" not in lines and "> question 73" in lines
    assert "question 0" not in output

    output = run_chat(server, token, "--conversation", short).stdout
    assert "Earlier messages" not in output
    assert output.splitlines()[1:5] == ["> question 0", "parley:", "answer 0", "> question 1"]
