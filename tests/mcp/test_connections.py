"""Parley's connections to the operator's MCP servers (mcp_client.connections, .tools, .status):
the tools they offer the agent, a tool list that changes, a server that dies and comes back,
servers that cannot start, and MCP_CONFIG itself.

The servers are real subprocesses: the example notes server (examples/notes_server.py) and
tests/mcp/changing_server.py (a tool list that grows; tools that kill the server, freeze it,
or take their time; a mode that never answers). Each test closes its connections, and checks
that no server process it started over stdio is left."""

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import RequestFactory
from mcp.client import stdio

from chat.blocks import ToolCallBlock, ToolResultBlock
from chat.engine import tools
from chat.engine.tools import ToolContext
from chat.engine.turns import Lease
from config import health
from mcp_client import config, connections, status
from mcp_client import tools as mcp_tools
from mcp_client.connections import Connections
from mcp_client.tools import McpTool
from tests.live_server import free_port, wait_for
from tests.notes_server import notes_config

CHANGING_SERVER = str(Path(__file__).with_name("changing_server.py"))
NOTES_TOOLS = {
    "list_notes",
    "read_note",
    "write_note",
    "delete_note",
    "slow_write",
    "new_note_from_form",
}
WAIT = 15  # seconds at most for any condition: a hang fails the test instead of the run


# --- Helpers -----------------------------------------------------------------------------------


@pytest.fixture
def mcp_config(settings, tmp_path) -> Callable[[dict | str], Path]:
    """`mcp_config(servers)`: MCP_CONFIG is a file naming `servers` (or holding the text given),
    read afresh."""

    def write(servers: dict | str) -> Path:
        path = tmp_path / "mcp.json"
        text = servers if isinstance(servers, str) else json.dumps({"mcpServers": servers})
        path.write_text(text)
        use_config(settings, path)
        return path

    config.load.cache_clear()
    yield write
    config.load.cache_clear()


def use_config(settings, path: Path | str) -> None:
    settings.MCP_CONFIG = str(path)
    config.load.cache_clear()


@contextlib.asynccontextmanager
async def connected() -> AsyncIterator[Connections]:
    """This loop's connections to MCP_CONFIG's servers (after their first attempt), closed
    after, leaving no tool of theirs in the registry and no server process running."""
    loop = asyncio.get_running_loop()
    try:
        await mcp_tools.connect()
        yield mcp_tools._connections[loop]
    finally:
        here = mcp_tools._connections.pop(loop, None)
        if here is not None:
            await here.close()
        for tool in tools.registry:
            if isinstance(tool, McpTool):
                tools.unregister(tool.name)
    assert server_processes() == []


def server_processes() -> list[str]:
    """The command lines of the MCP servers this process started over stdio (not the HTTP
    servers the tests start themselves)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        server = "changing_server" in command or "notes_server" in command
        if ppid == os.getpid() and server and "--http" not in command:
            found.append(command)
    return found


async def until(condition: Callable[[], object], what: str, seconds: float = WAIT) -> None:
    """Wait until `condition()` holds, at most `seconds`. Polled: it reads state that the
    connections' own tasks change."""
    try:
        async with asyncio.timeout(seconds):
            while not condition():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def offered_names() -> set[str]:
    return {spec.name for spec in tools.specs()}


def changing_entry(protocol: str = "auto", **extra) -> dict:
    """The changing server over stdio, its tools run without asking."""
    entry = {"command": sys.executable, "args": [CHANGING_SERVER], "protocol": protocol}
    return {**entry, "approval": {"default": "allow"}, **extra}


class ChangingOverHttp:
    """The changing server in --http mode on a port of its own, started (again) on demand."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tmp_path / "changing-http.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, CHANGING_SERVER, "--http", "--port", str(self.port)],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        wait_for(self._answers, 20, "the changing server over HTTP")

    def _answers(self) -> bool:
        assert self.process is not None
        assert self.process.poll() is None, self.log.read_text()
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@contextlib.contextmanager
def changing_over_http(tmp_path: Path):
    """The changing server over HTTP, stopped after."""
    server = ChangingOverHttp(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- 1. The notes server's tools, as the agent is offered them ---------------------------------


@pytest.mark.live
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_notes_servers_tools_are_offered_with_the_operators_policy(
    transport, tmp_path, settings
):
    config.load.cache_clear()
    with notes_config(tmp_path, transport) as (path, _notes):
        entry = json.loads(path.read_text())
        entry["mcpServers"]["notes"]["approval"]["tools"].update(
            {"delete_note": "deny", "write_note": "allow"}
        )
        path.write_text(json.dumps(entry))
        use_config(settings, path)
        try:
            async with connected() as here:
                assert here.servers["notes"].connected, here.servers["notes"].error
                specs = {spec.name: spec for spec in tools.specs()}
                subagent = {spec.name for spec in tools.specs(is_subagent=True)}
                assert tools.offered("mcp__notes__delete_note") is None
                assert tools.offered("mcp__notes__slow_write").policy == "ask"
                assert tools.offered("mcp__notes__write_note").policy == "allow"
        finally:
            config.load.cache_clear()

    names = {f"mcp__notes__{tool}" for tool in NOTES_TOOLS}
    assert names - {"mcp__notes__delete_note"} <= set(specs)
    # "deny": not offered at all.
    assert "mcp__notes__delete_note" not in specs
    read = specs["mcp__notes__read_note"]
    assert read.description == "Return the text of the note called `name`."
    assert read.parameters["type"] == "object"
    assert read.parameters["required"] == ["name"]
    assert read.parameters["properties"]["name"]["type"] == "string"
    assert specs["mcp__notes__slow_write"].parameters["properties"]["seconds"]["maximum"] == 60
    # Sub-agents get the same tools (a call of theirs that asks waits in the parent), and no
    # "deny" tool either.
    assert "mcp__notes__list_notes" in subagent
    assert "mcp__notes__read_note" in subagent
    assert "mcp__notes__write_note" in subagent
    assert "mcp__notes__slow_write" in subagent
    assert "mcp__notes__delete_note" not in subagent


# --- 2. A tool list that changes ---------------------------------------------------------------


@pytest.mark.live
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_tool_the_server_adds_is_offered(protocol, transport, mcp_config, tmp_path):
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            entry = changing_entry(protocol)
        else:
            url = stack.enter_context(changing_over_http(tmp_path)).url
            entry = {"url": url, "protocol": protocol, "approval": {"default": "allow"}}
        mcp_config({"changing": entry})
        async with connected() as here:
            server = here.servers["changing"]
            assert server.connected, server.error
            expected = "2026-07-28" if protocol == "auto" else "2025-11-25"
            assert server.client.protocol_version == expected
            assert {"mcp__changing__echo", "mcp__changing__add_tool"} <= offered_names()
            result = await server.client.call_tool("add_tool", {"name": "fresh"})
            assert not result.is_error
            await until(lambda: "mcp__changing__fresh" in offered_names(), "the new tool")
            assert "fresh" in server.tools
            assert "mcp__changing__fresh" in {s.name for s in tools.specs(is_subagent=True)}


@pytest.mark.live
async def test_an_event_stream_cut_while_idle_is_opened_again(mcp_config, tmp_path, monkeypatch):
    """A proxy (or an HTTP read timeout) ends the `subscriptions/listen` stream of an idle
    server: the stream is opened again and the tools listed again; the connection stays."""
    monkeypatch.setattr(connections, "HTTP_READ_SECONDS", 0.3)
    monkeypatch.setattr(connections, "RETRY_MIN_SECONDS", 0.1)
    lists = []
    list_tools = connections.ServerConnection._list_tools

    async def counted(self, client):
        lists.append(client)
        await list_tools(self, client)

    monkeypatch.setattr(connections.ServerConnection, "_list_tools", counted)
    with changing_over_http(tmp_path) as remote:
        mcp_config({"changing": {"url": remote.url, "approval": {"default": "allow"}}})
        async with connected() as here:
            server = here.servers["changing"]
            assert server.connected, server.error
            first = server.connected_at
            await until(lambda: len(lists) >= 3, "the stream to be cut and opened again, twice")
            result = await server.client.call_tool("add_tool", {"name": "fresh"})
            assert not result.is_error
            await until(lambda: "mcp__changing__fresh" in offered_names(), "the new tool")
            assert server.connected_at == first
            assert all(listed is server.client for listed in lists)


# --- 3. A server that dies ---------------------------------------------------------------------


def tool_call(name: str, arguments: dict, call_id: str) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, arguments=arguments)


@pytest.mark.live
@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_server_that_dies_is_started_again(protocol, mcp_config, conversation):
    mcp_config({"changing": changing_entry(protocol)})
    context = ToolContext(lease=Lease(conversation_id=conversation.pk, token=1))

    async def scenario() -> list[ToolResultBlock]:
        results = []
        async with connected() as here:
            server = here.servers["changing"]
            assert server.connected, server.error
            first = server.connected_at
            echo = await tools.run(tool_call("mcp__changing__echo", {"text": "hi"}, "c1"), context)
            results.append(echo)
            # The call that kills the server ends with an error the model reads.
            results.append(await tools.run(tool_call("mcp__changing__crash", {}, "c2"), context))
            await until(lambda: not server.connected, "the connection to end")
            # A call while it is down: an error result, not an exception out of the turn.
            down = tool_call("mcp__changing__echo", {"text": "anyone?"}, "c3")
            results.append(await tools.run(down, context))
            await until(lambda: server.connected, "the server to be started again")
            assert server.connected_at > first
            assert {"mcp__changing__echo", "mcp__changing__crash"} <= offered_names()
            again = tool_call("mcp__changing__echo", {"text": "back"}, "c4")
            results.append(await tools.run(again, context))
        return results

    echo, crashed, down, again = async_to_sync(scenario)()
    assert (echo.content, echo.is_error) == ("hi", False)
    assert crashed.is_error
    assert (
        crashed.content == "The MCP server changing failed while running crash: Connection closed"
    )
    assert down.is_error
    assert down.content == (
        "The MCP server changing is not available (the server's process exited); "
        "the tool did not run."
    )
    assert (again.content, again.is_error) == ("back", False)


@pytest.mark.live
@pytest.mark.django_db
def test_a_call_past_the_servers_timeout_tells_the_model_so(mcp_config, conversation):
    mcp_config({"changing": changing_entry(timeout=0.3)})
    context = ToolContext(lease=Lease(conversation_id=conversation.pk, token=1))

    async def scenario() -> tuple[ToolResultBlock, ToolResultBlock]:
        async with connected() as here:
            assert here.servers["changing"].connected, here.servers["changing"].error
            slow = tool_call("mcp__changing__wait", {"seconds": 5}, "c1")
            late = await tools.run(slow, context)
            quick = tool_call("mcp__changing__wait", {"seconds": 0}, "c2")
            return late, await tools.run(quick, context)

    late, quick = async_to_sync(scenario)()
    assert late.is_error
    assert late.content == (
        "mcp__changing__wait did not finish within 0.3 seconds; it may or may not have happened."
    )
    assert (quick.content, quick.is_error) == ("Waited 0 seconds", False)


@pytest.mark.live
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_that_goes_away_is_connected_again_when_it_is_back(
    protocol, mcp_config, tmp_path, monkeypatch
):
    monkeypatch.setattr(connections, "RETRY_MIN_SECONDS", 0.1)
    monkeypatch.setattr(connections, "RETRY_MAX_SECONDS", 0.2)
    with changing_over_http(tmp_path) as remote:
        entry = {"url": remote.url, "protocol": protocol, "approval": {"default": "allow"}}
        mcp_config({"changing": entry})
        async with connected() as here:
            server = here.servers["changing"]
            assert server.connected, server.error
            first = server.connected_at
            with pytest.raises(Exception):  # noqa: B017 (whichever the SDK raises)
                await server.call_tool(connections.Call(None, None, "crash"), {})
            await until(lambda: not server.connected, "the connection to end")
            remote.process.wait(10)
            lost = server.error
            await until(lambda: server.error != lost, "an attempt while it is away")
            assert server.error == "cannot connect to the server: All connection attempts failed"
            with pytest.raises(ConnectionError):
                await server.call_tool(connections.Call(None, None, "echo"), {"text": "hi"})
            await asyncio.to_thread(remote.start)
            await until(lambda: server.connected, "the server to be connected again")
            assert server.connected_at > first
            assert "mcp__changing__echo" in offered_names()
            result = await server.call_tool(connections.Call(None, None, "echo"), {"text": "hi"})
            assert result.content[0].text == "hi"


@pytest.mark.live
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_server_that_stops_answering_is_started_again(protocol, mcp_config, monkeypatch):
    monkeypatch.setattr(connections, "PING_SECONDS", 0.5)
    monkeypatch.setattr(connections, "RETRY_MIN_SECONDS", 0.1)
    # How long the SDK waits for a stdio server to exit before it kills it.
    monkeypatch.setattr(stdio, "PROCESS_TERMINATION_TIMEOUT", 0.2)
    mcp_config({"changing": changing_entry(protocol)})
    async with connected() as here:
        server = here.servers["changing"]
        assert server.connected, server.error
        first = server.connected_at
        frozen = asyncio.create_task(server.call_tool(connections.Call(None, None, "freeze"), {}))
        await until(lambda: not server.connected, "the connection to end")
        assert server.error == "the server did not answer for 0.5 seconds"
        # The call in flight ends with the connection, long before its timeout.
        with pytest.raises(Exception):  # noqa: B017 (whichever the SDK raises)
            async with asyncio.timeout(WAIT):
                await frozen
        await until(lambda: server.connected, "the server to be started again")
        assert server.connected_at > first
        assert "mcp__changing__echo" in offered_names()


@pytest.mark.live
async def test_a_server_that_never_answers_fails_its_attempts(mcp_config, monkeypatch):
    monkeypatch.setattr(connections, "CONNECT_SECONDS", 0.5)
    monkeypatch.setattr(stdio, "PROCESS_TERMINATION_TIMEOUT", 0.2)
    mcp_config({"mute": changing_entry(args=[CHANGING_SERVER, "--mute"])})
    async with connected() as here:
        server = here.servers["mute"]
        assert not server.connected
        assert server.error == "the server did not answer within 0.5 seconds"
        await until(lambda: status.summary()["mute"] == server.error, "the state published")


@pytest.mark.live
async def test_a_server_still_on_its_first_attempt_is_connecting(mcp_config, monkeypatch):
    monkeypatch.setattr(connections, "FIRST_CONNECT_SECONDS", 0.2)
    monkeypatch.setattr(stdio, "PROCESS_TERMINATION_TIMEOUT", 0.2)
    mcp_config({"mute": changing_entry(args=[CHANGING_SERVER, "--mute"])})
    async with connected() as here:
        assert not here.servers["mute"].attempted.is_set()
        await status.flush(here)
        assert status.summary() == {"mute": "connecting"}
        [listed] = status.servers()
        assert (listed["pending"], listed["connected"]) == (True, False)


# --- 4. Servers that cannot be used, and MCP_CONFIG itself -------------------------------------


@pytest.mark.django_db
async def test_a_command_that_does_not_exist_is_reported_in_plain_words(
    mcp_config, caplog, tmp_path
):
    missing = str(tmp_path / "no-such-server")
    mcp_config({"gone": {"command": missing}})
    with caplog.at_level(logging.INFO, logger="parley.mcp_client"):
        async with connected() as here:
            server = here.servers["gone"]
            assert not server.connected
            assert server.error == f"the command was not found: {missing}"
            await status.flush(here)
            summary = await sync_to_async(status.summary)()
            response = await health.healthz(RequestFactory().get("/healthz"))
    assert summary == {"gone": f"the command was not found: {missing}"}
    assert json.loads(response.content)["mcpServers"] == summary
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors[0] == (
        f"MCP server gone cannot be used: the command was not found: {missing}; trying again in 1s"
    )


def test_an_unreadable_config_is_one_clear_message(settings, tmp_path, caplog):
    use_config(settings, tmp_path / "missing.json")
    try:
        with caplog.at_level(logging.ERROR, logger="parley.mcp_client"):
            loaded = config.load()
        summary = status.summary()
    finally:
        config.load.cache_clear()
    expected = f"MCP_CONFIG {tmp_path / 'missing.json'} cannot be read: No such file or directory"
    assert loaded.error == expected
    assert loaded.servers == ()
    assert summary == {"MCP_CONFIG": expected}
    assert [r.getMessage() for r in caplog.records] == [expected]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "Expecting property name enclosed in double quotes"),
        ("[]", "the file must hold a JSON object"),
        ('{"mcpServers": []}', "mcpServers: Input should be a valid dictionary"),
    ],
)
def test_an_invalid_config_is_one_clear_message(text, why, mcp_config, caplog):
    with caplog.at_level(logging.ERROR, logger="parley.mcp_client"):
        mcp_config(text)
        loaded = config.load()
    assert loaded.error.startswith("MCP_CONFIG is not a valid mcpServers file: ")
    assert why in loaded.error
    assert "\n" not in loaded.error
    assert status.summary() == {"MCP_CONFIG": loaded.error}
    assert [r.getMessage() for r in caplog.records] == [loaded.error]


@pytest.mark.live
async def test_an_entry_with_a_bad_name_is_left_out_and_the_others_connect(mcp_config, caplog):
    mcp_config(
        {
            "bad name": changing_entry(),
            "two__parts": changing_entry(),
            "no-command": {"args": ["x"]},
            "changing": changing_entry(),
        }
    )
    with caplog.at_level(logging.ERROR, logger="parley.mcp_client"):
        async with connected() as here:
            assert list(here.servers) == ["changing"]
            assert here.servers["changing"].connected
            assert "mcp__changing__echo" in offered_names()
            await status.flush(here)
            summary = await sync_to_async(status.summary)()
    name_rule = "left out: the name may hold only letters, digits, _ and - (no __)"
    assert summary == {
        "bad name": name_rule,
        "two__parts": name_rule,
        "no-command": "left out: url: Field required; args: Extra inputs are not permitted",
        "changing": "ok",
    }
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"MCP server bad name {name_rule}" in logged
    assert f"MCP server two__parts {name_rule}" in logged


def test_no_mcp_config_means_no_servers(settings):
    use_config(settings, "")
    try:
        assert config.load() == config.Config()
        assert status.summary() == {}
    finally:
        config.load.cache_clear()


# --- 5. Environment variables in MCP_CONFIG ----------------------------------------------------


def test_variables_are_expanded_in_every_string_of_an_entry(monkeypatch):
    monkeypatch.setenv("PARLEY_TEST_PYTHON", "/opt/python3")
    monkeypatch.setenv("PARLEY_TEST_TOKEN", "s3cret")
    monkeypatch.setenv("PARLEY_TEST_EMPTY", "")
    monkeypatch.delenv("PARLEY_TEST_UNSET", raising=False)
    parsed = config.parse(
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": "${PARLEY_TEST_PYTHON}",
                        "args": ["${PARLEY_TEST_UNSET:-server.py}", "--dir=${PARLEY_TEST_UNSET}"],
                        "env": {
                            "TOKEN": "${PARLEY_TEST_TOKEN}",
                            "MODE": "${PARLEY_TEST_EMPTY:-fallback}",
                            "PLAIN": "$PARLEY_TEST_TOKEN and ${not a name}",
                        },
                        "cwd": "${PARLEY_TEST_UNSET:-/srv/notes}",
                    },
                    "remote": {
                        "url": "https://${PARLEY_TEST_UNSET:-mcp.example.org}/mcp",
                        "headers": {"Authorization": "Bearer ${PARLEY_TEST_TOKEN}"},
                        "approval": {"tools": {"${PARLEY_TEST_TOKEN}": "allow"}},
                    },
                }
            }
        )
    )
    assert (parsed.error, parsed.invalid) == ("", {})
    local, remote = parsed.servers
    assert local.spec.command == "/opt/python3"
    assert local.spec.args == ["server.py", "--dir="]
    assert local.spec.env == {
        "TOKEN": "s3cret",
        "MODE": "fallback",  # set but empty: the default, as in a shell
        "PLAIN": "$PARLEY_TEST_TOKEN and ${not a name}",
    }
    assert local.spec.cwd == "/srv/notes"
    assert remote.spec.url == "https://mcp.example.org/mcp"
    assert remote.spec.headers == {"Authorization": "Bearer s3cret"}
    # The approval names tools, and is taken as written.
    assert remote.spec.approval.tools == {"${PARLEY_TEST_TOKEN}": "allow"}


def test_a_command_that_expands_to_nothing_is_left_out(monkeypatch):
    monkeypatch.delenv("PARLEY_TEST_UNSET", raising=False)
    parsed = config.parse(
        json.dumps(
            {
                "mcpServers": {
                    "empty": {"command": "${PARLEY_TEST_UNSET}"},
                    "fine": {"command": "${PARLEY_TEST_UNSET:-python3}"},
                }
            }
        )
    )
    assert [server.name for server in parsed.servers] == ["fine"]
    assert parsed.servers[0].spec.command == "python3"
    assert parsed.invalid == {"empty": "command: String should have at least 1 character"}
