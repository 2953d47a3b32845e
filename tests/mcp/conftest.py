"""Parley's MCP endpoint driven by the SDK's own client (mcp.client.streamable_http and
ClientSession) over real HTTP: accounts and tokens written straight into the live server's
database, the JSON API to answer as the user does, and a TCP proxy that can cut connections;
and, in process, the notes server's write_note as Parley's agent is offered it."""

import asyncio
import json
import os
import secrets
import subprocess
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from api.tokens import PREFIX, digest
from chat.engine import tools
from mcp_client.config import parse
from mcp_client.connections import ServerConnection
from mcp_client.tools import McpTool
from mcp_server.connecting import TOKEN_VARIABLE, claude_code_hooks
from tests.fake_llm import FakeLLM
from tests.live_server import LiveServer

CLIENT = "Test agent"


@dataclass
class Account:
    username: str
    user_id: int
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def execute(server: LiveServer, sql: str, *params) -> None:
    """Write to the server's database (placeholders: %s)."""
    server.execute(sql, *params)


def add_account(server: LiveServer, username: str, *, expire_after: int | None = None) -> Account:
    """A user with a personal API token (and, with `expire_after`, their own question
    deadline in seconds), written into the live server's database."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    execute(
        server,
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, "
        "is_staff, is_active, date_joined) VALUES ('!', false, %s, '', '', '', false, true, %s)",
        username,
        now,
    )
    [(user_id,)] = server.query("SELECT id FROM auth_user WHERE username = %s", username)
    token = PREFIX + secrets.token_urlsafe(32)
    execute(
        server,
        "INSERT INTO api_apitoken (name, prefix, digest, created_at, user_id) "
        "VALUES ('mcp', %s, %s, %s, %s)",
        token[:13],
        digest(token),
        now,
        user_id,
    )
    if expire_after is not None:
        execute(
            server,
            "INSERT INTO accounts_preferences (theme, notify_in_browser, question_expire_after, "
            "user_id) VALUES ('system', false, %s, %s)",
            expire_after,
            user_id,
        )
    return Account(username, user_id, token)


@pytest.fixture(scope="module")
def mcp_live(tmp_path_factory):
    """One Parley server for a test module: quick progress notifications and deadline sweeps."""
    server = LiveServer(
        tmp_path_factory.mktemp("mcp"), MCP_PROGRESS_SECONDS="0.2", PARLEY_SWEEP_SECONDS="0.2"
    )
    server.set_up_database()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def account(mcp_live, request):
    return add_account(mcp_live, f"ada-{request.node.name[-40:]}-{secrets.token_hex(3)}")


@dataclass
class Progress:
    """The progress notifications a call received, and an event set at each."""

    values: list[float] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    came: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.values.append(progress)
        self.messages.append(message or "")
        self.came.set()

    async def next(self) -> None:
        """Wait for the next notification (10 s at most)."""
        self.came.clear()
        await asyncio.wait_for(self.came.wait(), 10)


@asynccontextmanager
async def mcp_client(
    base_url: str, token: str, *, name: str = CLIENT, headers=None, read_timeout: float = 60
):
    """An initialized ClientSession of the SDK on base_url's /mcp/, as `name`, that waits
    `read_timeout` seconds for the server to say something; the response headers it saw are
    in `session.seen_headers`."""
    seen: list[httpx2.Headers] = []

    async def keep(response):
        seen.append(response.headers)

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}", **(headers or {})},
            timeout=httpx2.Timeout(30, read=read_timeout),
            event_hooks={"response": [keep]},
        ) as http,
        streamable_http_client(f"{base_url}/mcp/", http_client=http) as (read, write),
        ClientSession(read, write, client_info=Implementation(name=name, version="1.0")) as session,
    ):
        await session.initialize()
        session.seen_headers = seen
        yield session


def session_id(session) -> str:
    return next(h["mcp-session-id"] for h in session.seen_headers if "mcp-session-id" in h)


@asynccontextmanager
async def api(base_url: str, account: Account):
    async with httpx.AsyncClient(
        base_url=f"{base_url}/api/v1", headers=account.auth, timeout=30
    ) as client:
        yield client


async def pending(client) -> list[dict]:
    response = await client.get("/questions")
    assert response.status_code == 200, response.text
    return response.json()


class Proxy:
    """A TCP proxy to a port on 127.0.0.1 that can drop every connection through it at once
    (a network that fails while the server and the client live on)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers |= {writer, up_writer}

        async def pipe(source, sink):
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}

    def drop_connections(self) -> None:
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.drop_connections()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@asynccontextmanager
async def mcp_client_resumed(base_url: str, token: str, headers: dict[str, str]):
    """A ClientSession of the SDK on an MCP session opened earlier (`headers` name it and its
    protocol version): no new initialize, as a client that resumes does."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}", **headers},
            timeout=httpx2.Timeout(30, read=60),
        ) as http,
        streamable_http_client(f"{base_url}/mcp/", http_client=http, terminate_on_close=False) as (
            read,
            write,
        ),
        ClientSession(read, write) as session,
    ):
        yield session


# The pinned agent CLIs (tools/agents), as `make agents` installs them.
ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / ".tools" / "agents" / "node_modules" / ".bin"
CLAUDE = AGENTS / "claude"


class Claude:
    """`claude -p` in a project folder of its own, with a home of its own holding the
    Settings page's hooks."""

    def __init__(self, server: LiveServer, token: str, model: FakeLLM, tmp_path: Path) -> None:
        self.project = tmp_path / "proj"
        self.project.mkdir()
        home = tmp_path / "home"
        config = home / ".claude"
        config.mkdir(parents=True)
        (config / "settings.json").write_text(json.dumps(claude_code_hooks(server.url)))
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(config),
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            TOKEN_VARIABLE: token,
        }
        self.process: subprocess.Popen | None = None

    def start(self, prompt: str = "Do it.") -> subprocess.Popen:
        self.process = subprocess.Popen(
            [str(CLAUDE), "-p", prompt, "--model", "claude-sonnet-4-5", "--output-format", "json"],
            cwd=self.project,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return self.process

    def finish(self, timeout: float = 60) -> dict:
        out, err = self.process.communicate(timeout=timeout)
        assert self.process.returncode == 0, err
        return json.loads(out)


# --- The notes server's write_note as Parley's agent is offered it, in process -------------


class NotesServer(ServerConnection):
    """The notes server, connected in name only: the calls that reach it are recorded."""

    def __init__(self) -> None:
        super().__init__(parse('{"mcpServers": {"notes": {"command": "notes"}}}').servers[0], None)
        self.calls: list[dict] = []

    async def call_tool(self, call, arguments: dict, **_) -> types.CallToolResult:
        self.calls.append(arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text="Saved")])


@pytest.fixture
def server() -> NotesServer:
    return NotesServer()


@pytest.fixture
def write_note(server):
    """A tool that asks first (no operator setting, and not read-only), offered to the agent."""
    tool = McpTool(server, types.Tool(name="write_note", input_schema={"type": "object"}))
    tools.register(tool)
    yield tool
    tools.unregister(tool.name)
