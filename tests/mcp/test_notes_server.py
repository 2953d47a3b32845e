"""The example notes server (examples/notes_server.py) driven by the SDK's own client, as a
subprocess: over stdio and over streamable HTTP, each with the client forced to the legacy
handshake (2025-11-25: elicitation/create sent while the call waits) and in its default mode
(2026-07-28: the question comes back as an input-required result and the client calls again)."""

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import ElicitRequest, ElicitResult, InputRequiredResult

from tests.live_server import free_port, wait_for

pytestmark = pytest.mark.live

SERVER = Path(__file__).resolve().parents[2] / "examples" / "notes_server.py"
PROTOCOL = {"legacy": "2025-11-25", "auto": "2026-07-28"}
TIMEOUT = 10  # seconds for any one request: a hang fails the test instead of the run
# Seconds for a new Python process to start another (a stdio server) and reach its tool: two
# interpreters importing the SDK, slow on a busy machine.
STARTUP = 30

FORM = {"name": "groceries", "text": "Milk", "pinned": True, "priority": 5, "colour": "green"}
# The form as the client receives it (the requested schema's properties).
FORM_FIELDS = {
    "name": {
        "type": "string",
        "title": "Note name",
        "description": "A short name",
        "maxLength": 60,
    },
    "text": {"type": "string", "title": "Text"},
    "pinned": {"type": "boolean", "title": "Pinned", "default": False},
    "priority": {"type": "integer", "title": "Priority", "minimum": 1, "maximum": 5, "default": 3},
    "colour": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"]},
    "tags": {
        "type": "array",
        "title": "Tags",
        "items": {"type": "string", "enum": ["work", "home", "urgent"]},
        "maxItems": 2,
        "default": [],
    },
}
TOOLS = {
    # name: (title, readOnlyHint, destructiveHint)
    "list_notes": ("List notes", True, None),
    "read_note": ("Read note", True, None),
    "write_note": ("Write note", False, False),
    "delete_note": ("Delete note", False, True),
    "slow_write": ("Slow write", False, False),
    "new_note_from_form": ("New note (asks for details)", False, False),
}
BAD_NAMES = ["", "/etc/passwd", "a/b", "a\\b", "..", "x..y", "nul\0", "n" * 101]


@pytest.fixture
def notes(tmp_path) -> Path:
    """The server's NOTES_DIR; the server makes it."""
    return tmp_path / "notes"


def server_env(notes: Path) -> dict[str, str]:
    return {**os.environ, "NOTES_DIR": str(notes)}


def server_for(transport: str, notes: Path, request) -> StdioServerParameters | str:
    """What Client connects to: the server as its stdio subprocess, or the HTTP server's URL."""
    if transport == "http":
        return request.getfixturevalue("http_url")
    return StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=server_env(notes))


@pytest.fixture
def http_url(notes, tmp_path):
    """The server in --http mode on a free port: its /mcp URL once the port answers."""
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(SERVER), "--http", "--port", str(port)],
            env=server_env(notes),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def answers() -> bool:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                return False
            return True

        wait_for(answers, TIMEOUT, "the notes server's port")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(
    params=[("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")],
    ids=lambda param: "-".join(param),
)
def connect(request, notes):
    """`async with connect(answer) as client:` a Client of the server over this test's
    transport and mode, whose form elicitations `answer` (an ElicitResult) answers; the
    questions it was asked are in `client.asked`."""
    transport, mode = request.param
    server = server_for(transport, notes, request)

    @asynccontextmanager
    async def open_client(answer: ElicitResult | None = None):
        asked = []

        async def elicit(context, params):
            asked.append(params)
            return answer

        client = Client(
            server,
            mode=mode,
            read_timeout_seconds=TIMEOUT,
            elicitation_callback=elicit if answer is not None else None,
        )
        async with client:
            assert client.protocol_version == PROTOCOL[mode]
            client.asked = asked
            yield client

    return open_client


def text(result) -> str:
    [content] = result.content
    return content.text


def writes(notes: Path) -> list[str]:
    """The lines of NOTES_DIR/.writes.log: one per write that really happened."""
    log = notes / ".writes.log"
    return log.read_text().splitlines() if log.exists() else []


def note_files(notes: Path) -> list[str]:
    return sorted(path.name for path in notes.glob("*.md"))


async def test_lists_the_tools_with_titles_and_hints(connect):
    async with connect() as client:
        assert client.server_info.name == "notes"
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == set(TOOLS)
    for name, (title, read_only, destructive) in TOOLS.items():
        tool = tools[name]
        assert tool.title == tool.annotations.title == title
        assert tool.annotations.read_only_hint is read_only, name
        assert tool.annotations.destructive_hint is destructive, name
        assert tool.annotations.open_world_hint is False
    # The form's answers are asked for, not passed in: no arguments.
    assert tools["new_note_from_form"].input_schema.get("properties") == {}
    assert tools["slow_write"].input_schema["properties"]["seconds"]["maximum"] == 60


async def test_write_read_list_and_delete(connect, notes):
    async with connect() as client:
        assert text(await client.call_tool("list_notes", {})) == "No notes yet."
        saved = await client.call_tool("write_note", {"name": "todo", "text": "Buy milk ☕"})
        assert not saved.is_error
        assert text(saved) == "Saved todo (10 characters)"
        await client.call_tool("write_note", {"name": "a note", "text": ""})
        assert text(await client.call_tool("read_note", {"name": "todo"})) == "Buy milk ☕"
        assert text(await client.call_tool("list_notes", {})) == "a note\ntodo"
        replaced = await client.call_tool("write_note", {"name": "todo", "text": "Done"})
        assert text(replaced) == "Saved todo (4 characters)"
        assert text(await client.call_tool("read_note", {"name": "todo"})) == "Done"
        assert not (await client.call_tool("delete_note", {"name": "todo"})).is_error
        missing = await client.call_tool("read_note", {"name": "todo"})
        assert missing.is_error and "No note called 'todo'" in text(missing)
        assert (await client.call_tool("delete_note", {"name": "todo"})).is_error
    assert (notes / "a note.md").read_text() == ""
    assert note_files(notes) == ["a note.md"]
    assert writes(notes) == ["write todo", "write a note", "write todo"]


async def test_bad_names_are_error_results_and_touch_nothing(connect, notes, tmp_path):
    answer = ElicitResult(action="accept", content={**FORM, "name": "../escape"})
    async with connect(answer) as client:
        for name in BAD_NAMES:
            for tool, arguments in [
                ("read_note", {"name": name}),
                ("write_note", {"name": name, "text": "x"}),
                ("delete_note", {"name": name}),
                ("slow_write", {"name": name, "text": "x", "seconds": 0}),
            ]:
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, name)
                assert "name" in text(result)
        from_form = await client.call_tool("new_note_from_form", {})
        assert from_form.is_error and "'../escape'" in text(from_form)
        too_slow = await client.call_tool("slow_write", {"name": "n", "text": "x", "seconds": 61})
        assert too_slow.is_error
    assert note_files(notes) == [] and writes(notes) == []
    assert not (tmp_path / "escape.md").exists()


async def test_a_symlink_in_the_sandbox_is_not_followed(connect, notes, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    notes.mkdir(exist_ok=True)
    (notes / "link.md").symlink_to(outside)
    async with connect() as client:
        assert text(await client.call_tool("list_notes", {})) == "No notes yet."
        assert (await client.call_tool("read_note", {"name": "link"})).is_error
        # Writing replaces the link with a note; the file it pointed to keeps its text.
        assert not (await client.call_tool("write_note", {"name": "link", "text": "mine"})).is_error
    assert outside.read_text() == "secret"
    assert not (notes / "link.md").is_symlink() and (notes / "link.md").read_text() == "mine"


async def test_the_form_accepted_saves_the_note_once(connect, notes):
    async with connect(ElicitResult(action="accept", content=FORM)) as client:
        result = await client.call_tool("new_note_from_form", {})
        assert not result.is_error
        assert text(result) == "Saved groceries from the form"
        assert text(await client.call_tool("read_note", {"name": "groceries"})) == "Milk"
        [question] = client.asked
    assert question.mode == "form"
    assert question.requested_schema["properties"] == FORM_FIELDS
    assert question.requested_schema["required"] == ["name", "text", "colour"]
    assert writes(notes) == ["write groceries"]


async def test_the_forms_tags_are_taken_as_a_list_and_said_in_the_answer(connect, notes):
    answer = ElicitResult(action="accept", content={**FORM, "tags": ["urgent", "work"]})
    async with connect(answer) as client:
        result = await client.call_tool("new_note_from_form", {})
    assert not result.is_error
    assert text(result) == "Saved groceries from the form, tagged urgent, work"


@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("decline", "The user declined: nothing saved."),
        ("cancel", "The user cancelled: nothing saved."),
    ],
)
async def test_the_form_declined_or_cancelled_saves_nothing(connect, notes, action, said):
    async with connect(ElicitResult(action=action)) as client:
        result = await client.call_tool("new_note_from_form", {})
        assert len(client.asked) == 1
    assert not result.is_error
    assert text(result) == said
    assert note_files(notes) == [] and writes(notes) == []


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_in_2026_the_form_is_an_input_required_result(transport, notes, request):
    """Driven by hand: the first call returns the question and runs nothing; the call again
    with the answer and the server's state saves the note."""
    server = server_for(transport, notes, request)

    async def not_mid_call(context, params):
        raise AssertionError("asked mid-call")

    # The callback declares the form elicitation capability; the rounds here are by hand.
    client = Client(server, read_timeout_seconds=TIMEOUT, elicitation_callback=not_mid_call)
    async with client:
        assert client.protocol_version == "2026-07-28"
        first = await client.session.call_tool("new_note_from_form", {}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        [(key, question)] = first.input_requests.items()
        assert isinstance(question, ElicitRequest)
        assert question.params.requested_schema["properties"] == FORM_FIELDS
        assert writes(notes) == []
        answer = ElicitResult(action="accept", content=FORM)
        result = await client.session.call_tool(
            "new_note_from_form",
            {},
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert text(result) == "Saved groceries from the form"
    assert writes(notes) == ["write groceries"]


CALLER = """
import json, os, sys, anyio
from mcp import Client, StdioServerParameters
server, mode, arguments = json.loads(sys.argv[1])
if isinstance(server, list):
    server = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
async def main():
    async with Client(server, mode=mode) as client:
        await client.call_tool("slow_write", arguments)
anyio.run(main)
"""


@pytest.mark.parametrize(
    ("transport", "mode"),
    [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")],
)
def test_a_client_killed_during_slow_write_writes_at_most_once(transport, mode, notes, request):
    seconds = 0.5
    if transport == "http":
        server = request.getfixturevalue("http_url")
    else:  # the caller runs the server itself: the command line
        server = [sys.executable, str(SERVER)]
    arguments = {"name": "memo", "text": "all of it", "seconds": seconds}
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, json.dumps([server, mode, arguments])],
        env=server_env(notes),  # passed on to a stdio server, the caller's child
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: "start memo" in writes(notes), STARTUP, "the call to start")
        started = time.monotonic()
    finally:
        caller.kill()
        caller.wait()
    # The server either goes on with the call (it writes when the wait ends) or drops it.
    deadline = started + seconds + 1.5
    while time.monotonic() < deadline and "write memo" not in writes(notes):
        time.sleep(0.02)
    assert writes(notes).count("start memo") == 1
    assert writes(notes).count("write memo") <= 1
    if (notes / "memo.md").exists():
        assert (notes / "memo.md").read_text() == "all of it"
    assert [path.name for path in notes.glob(".tmp-*")] == []
