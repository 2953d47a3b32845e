"""One connection per MCP server per process, kept open and reused by every turn.

Each server gets a task on the event loop that runs the turns (daphne's, or a worker's): it
connects with the SDK's `Client` (stdio: it starts the operator's command; HTTP: streamable
HTTP), lists the tools, and holds the session until the server dies (a stdio server's process
exits, an HTTP server's connection fails) or stops answering pings; then it connects again,
with a growing pause between attempts. An attempt that gets no answer within CONNECT_SECONDS
fails too. `notifications/tools/list_changed` lists the tools again (the newest protocol sends
it on a `subscriptions/listen` stream, opened again when it ends). What each server is doing
(connected, or why not) is kept for /settings/tools/, /healthz and the log.

A call runs in the turn's own task through the shared session. In the newer protocol a server
that needs the person's input answers the call with input-required rounds, which the caller
answers and which are sent back with the server's state (`call_tool`'s `answer`, kept across
restarts by mcp_client.inputs). In the legacy protocol the server sends an elicitation while
the call runs; it arrives on the session's task and belongs to the one call in flight on the
server (with several in flight it cannot be told apart, and is cancelled).
"""

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio
import httpx2
import mcp_types as types
from channels.db import database_sync_to_async
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_client import signin
from mcp_client.config import ServerConfig, StdioServer, load

logger = logging.getLogger("parley.mcp_client")

# How long a turn waits for the servers' first connection before it goes on without them.
FIRST_CONNECT_SECONDS = 15.0
PING_SECONDS = 15.0
# How long a server may take to start and list its tools (a first `npx` may download).
CONNECT_SECONDS = 60.0
# How long an HTTP response may stay silent (None: as long as the server keeps it open).
HTTP_READ_SECONDS: float | None = None
RETRY_MIN_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0

# The call a task is running: who to ask when its server elicits (set by mcp_client.tools).
current_call: contextvars.ContextVar["Call | None"] = contextvars.ContextVar(
    "parley_mcp_call", default=None
)

Elicit = Callable[["Call", str, Any], Awaitable[types.ElicitResult]]


@dataclass(frozen=True)
class Call:
    """A call in flight: what an elicitation needs to reach the person."""

    lease: Any  # chat.engine.turns.Lease
    call: Any  # chat.blocks.ToolCallBlock
    tool: str


@dataclass(frozen=True)
class Round:
    """One answered round of a call's input requests (2026-07-28): its number (from 1), the
    responses by the server's keys, and the server's opaque state, echoed byte for byte."""

    number: int
    responses: dict[str, Any] | None
    request_state: str | None


# Answers one input-required result of a call: (the result, its round's number) -> the round.
AnswerInputs = Callable[[types.InputRequiredResult, int], Awaitable[Round]]


class ServerConnection:
    def __init__(self, config: ServerConfig, elicit: Elicit) -> None:
        self.config = config
        self.name = config.name
        self.elicit = elicit
        self.client: Client | None = None
        self.tools: dict[str, types.Tool] = {}
        self.error = ""
        self.connected_at: float | None = None
        self.attempted = asyncio.Event()  # the first attempt ended, either way
        # Called when the tools or the state change (the registry and the status follow).
        self.tools_changed: Callable[[], None] = lambda: None
        self._broken = asyncio.Event()
        self._lost_why = ""  # why the connection broke, when the session cannot say
        self._relist = asyncio.Event()
        self._inflight: list[Call] = []
        self.task: asyncio.Task | None = None

    @property
    def connected(self) -> bool:
        return self.client is not None

    def start(self) -> None:
        """Connect and hold the connection, on a task of its own; a server each user signs in to
        is connected per call instead, with that user's token (`call_tool`), and offers the
        tools it listed at the newest sign-in (`load_listing`)."""
        if self.config.per_user:
            self.attempted.set()
            return
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"mcp server {self.name}"
        )

    async def load_listing(self) -> None:
        """A per-user server's tools: those listed at its newest sign-in."""
        listed = await database_sync_to_async(signin.newest_tools)(self.name)
        tools = {}
        for tool in listed:
            with contextlib.suppress(ValueError):  # a listing the SDK no longer reads
                parsed = types.Tool.model_validate(tool)
                tools[parsed.name] = parsed
        if tools != self.tools:
            self.tools = tools
            self._changed()

    def _client(self, auth: httpx2.Auth | None = None) -> Client:
        spec = self.config.spec
        if isinstance(spec, StdioServer):
            parameters = StdioServerParameters(
                command=spec.command, args=spec.args, env=spec.env or None, cwd=spec.cwd
            )
            transport: Any = stdio_client(parameters)
            ended = "the server's process exited"
        else:
            transport = _http(spec.url, spec.headers, auth)
            ended = "the server closed the connection"
        return Client(
            _watched(transport, lambda: self._lost(ended)),
            mode=spec.protocol,
            elicitation_callback=self._on_elicit,
            message_handler=self._on_message,
            client_info=types.Implementation(name="parley", version="3"),
            cache=None,
        )

    def _changed(self) -> None:
        """Tell the registry and the status; their failure is not the connection's."""
        try:
            self.tools_changed()
        except Exception:
            logger.exception("MCP server %s: the tools could not be updated", self.name)

    def _lost(self, why: str) -> None:
        """The connection is gone (the transport ended, or a request found it closed)."""
        if not self._broken.is_set():
            self._lost_why = why
            self._broken.set()

    async def _run(self) -> None:
        pause = RETRY_MIN_SECONDS
        while True:
            began = time.monotonic()
            self._broken.clear()
            self._relist.clear()
            self._lost_why = ""
            held = False
            try:
                # A server that starts but never answers fails the attempt too.
                async with asyncio.timeout(CONNECT_SECONDS) as deadline:
                    async with self._client() as client:
                        await self._list_tools(client)
                        deadline.reschedule(None)
                        self.client, self.error = client, ""
                        self.connected_at = time.time()
                        held = True
                        self.attempted.set()
                        self._changed()
                        logger.info("MCP server %s connected: %s tools", self.name, len(self.tools))
                        await self._hold(client)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if asyncio.current_task().cancelling():  # closing: the SDK wrapped the cancel
                    raise
                self.error = _describe(error)
                if deadline.expired():
                    self.error = f"the server did not answer within {CONNECT_SECONDS:g} seconds"
            finally:
                self.client = None
            if self._lost_why:
                self.error = self._lost_why
            if time.monotonic() - began > RETRY_MAX_SECONDS:
                pause = RETRY_MIN_SECONDS  # it ran a while: a fresh failure, not a crash loop
            if held:
                logger.warning(
                    "MCP server %s disconnected: %s; connecting again in %gs",
                    self.name,
                    self.error,
                    pause,
                )
            else:
                logger.error(
                    "MCP server %s cannot be used: %s; trying again in %gs",
                    self.name,
                    self.error,
                    pause,
                )
            self.attempted.set()
            self._changed()
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_MAX_SECONDS)

    async def _hold(self, client: Client) -> None:
        """Keep the session until it breaks: the transport ended or failed, or a ping went
        unanswered. Any answer to a ping counts, an error too (the newest protocol has no ping
        method), but "connection closed"."""
        watcher = None
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            watcher = asyncio.create_task(self._listen(client))
        try:
            while not self._broken.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(PING_SECONDS):
                        await _first(self._broken.wait(), self._relist.wait())
                if self._relist.is_set():
                    self._relist.clear()
                    try:
                        async with asyncio.timeout(CONNECT_SECONDS):
                            await self._list_tools(client)
                    except TimeoutError:
                        self._lost(
                            f"the server did not list its tools within {CONNECT_SECONDS:g} seconds"
                        )
                    continue
                if not self._broken.is_set():
                    await self._ping(client)
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.wait([watcher])
        raise ConnectionError(self._lost_why or "the connection was lost")

    async def _ping(self, client: Client) -> None:
        try:
            async with asyncio.timeout(PING_SECONDS):
                # The session's ping: the Client's own warns that the newest protocol has none.
                await client.session.send_ping()
        except TimeoutError:
            self._lost(f"the server did not answer for {PING_SECONDS:g} seconds")
        except MCPError as error:
            if error.code == CONNECTION_CLOSED:
                self._lost("the connection was lost")

    async def _listen(self, client: Client) -> None:
        """The newest protocol sends tools/list_changed only on a `subscriptions/listen`
        stream (the older one sends it on the session, to `_on_message`). A stream that ends
        (a proxy cut it while idle) is opened again, and the tools listed again as events may
        have been missed; a stream that cannot be opened again means the connection is gone."""
        opened_before = False
        while True:
            opened = False
            try:
                async with client.listen(tools_list_changed=True) as changes:
                    opened = opened_before = True
                    async for _ in changes:
                        self._relist.set()
            except ListenNotSupportedError:
                return
            except MCPError as error:
                if error.code == CONNECTION_CLOSED or (opened_before and not opened):
                    self._lost("the connection was lost")
                    return
                if not opened:
                    return  # the server sends no change events
            except SubscriptionLost:
                if not opened:
                    self._lost("the connection was lost")
                    return
            except Exception as error:
                if not opened:
                    self._lost(_describe(error))
                    return
                logger.info("MCP server %s: its event stream failed: %s", self.name, error)
            self._relist.set()
            await asyncio.sleep(RETRY_MIN_SECONDS)

    async def _list_tools(self, client: Client) -> None:
        self.tools = await _all_tools(client)
        self._changed()

    async def _on_message(self, message) -> None:
        if isinstance(message, Exception):
            self._lost(_describe(message))
        elif isinstance(message, types.ToolListChangedNotification):
            self._relist.set()

    async def _on_elicit(self, context, params) -> types.ElicitResult | types.ErrorData:
        call = current_call.get()
        if call is None and len(self._inflight) == 1:
            call = self._inflight[0]
        if call is None:
            logger.warning("MCP server %s elicited with no single call in flight", self.name)
            return types.ElicitResult(action="cancel")
        return await self.elicit(call, self.name, params)

    async def call_tool(
        self,
        call: Call,
        arguments: dict,
        *,
        answer: "AnswerInputs | None" = None,
        resume: "Round | None" = None,
        user_id: int | None = None,
    ) -> types.CallToolResult:
        """Call the tool through the open session: ConnectionError if there is none,
        TimeoutError when the server's `timeout` passed first, MCPError for the rest.

        With `answer`, a server on 2026-07-28 that needs input first (an input-required
        result) has each round answered by `answer(result, round)`, which returns the round
        to send (its responses, and the server's state echoed); with `resume`, the call goes on
        from that round (answered after a restart) instead of starting. Without `answer`, the
        SDK answers through the elicitation callback, in memory.

        A server each user signs in to is called with `user_id`'s own token over a connection of
        this call's own: signin.NotSignedIn if they have no working sign-in, or the server refused
        it (it ran nothing then)."""
        if self.config.per_user:
            bearer = signin.Bearer(user_id, self.name)
            await bearer.token()  # NotSignedIn before connecting at all
            try:
                async with self._client(bearer) as client:
                    return await self._call(client, call, arguments, answer, resume)
            except Exception:
                if bearer.refused:
                    raise signin.NotSignedIn(bearer.refused) from None
                raise
        client = self.client
        if client is None:
            raise ConnectionError(self.error or "not connected")
        return await self._call(client, call, arguments, answer, resume)

    async def _call(
        self,
        client: Client,
        call: Call,
        arguments: dict,
        answer: "AnswerInputs | None",
        resume: "Round | None",
    ) -> types.CallToolResult:
        token = current_call.set(call)
        self._inflight.append(call)
        timeout = self.config.spec.timeout
        try:
            if answer is None:
                return await client.call_tool(call.tool, arguments, read_timeout_seconds=timeout)
            result = await self._resume(client, call, arguments, resume)
            number = resume.number if resume is not None else 0
            while isinstance(result, types.InputRequiredResult):
                number += 1
                result = await self._send(client, call, arguments, await answer(result, number))
            return result
        except MCPError as error:
            if error.code == CONNECTION_CLOSED:
                self._lost("the connection was lost")
            elif error.code == REQUEST_TIMEOUT:
                raise TimeoutError(error.message) from error
            raise
        finally:
            self._inflight.remove(call)
            current_call.reset(token)

    async def _resume(
        self, client: Client, call: Call, arguments: dict, round: "Round | None"
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The call's first request, or `round` answered after a restart. A server that no
        longer knows the state it sent (it restarted too, as a stdio server does with Parley)
        gets the answers alone, as a new request: it may ask again."""
        try:
            return await self._send(client, call, arguments, round)
        except MCPError as error:
            if round is None or round.request_state is None or error.code != INVALID_PARAMS:
                raise
        return await self._send(client, call, arguments, replace(round, request_state=None))

    async def _send(
        self, client: Client, call: Call, arguments: dict, round: "Round | None"
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One request of the call: the first, or the retry carrying `round`'s answers."""
        return await client.session.call_tool(
            call.tool,
            arguments,
            read_timeout_seconds=self.config.spec.timeout,
            input_responses=round.responses if round is not None else None,
            request_state=round.request_state if round is not None else None,
            allow_input_required=True,
        )

    def status(self) -> dict:
        return {
            "name": self.name,
            "transport": self.config.transport,
            "connected": self.connected,
            "error": "" if self.connected else (self.error or "connecting"),
            "tools": sorted(self.tools),
        }


class _WatchedStream:
    """A transport's read stream that says when it ends: when a stdio server's process exits,
    the SDK only fails the requests sent after, and the session would seem alive."""

    def __init__(self, stream: Any, ended: Callable[[], None]) -> None:
        self._stream = stream
        self._ended = ended

    def __getattr__(self, name: str) -> Any:  # last_context, and anything else the SDK reads
        return getattr(self._stream, name)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    def __aiter__(self) -> "_WatchedStream":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> "_WatchedStream":
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stream.__aexit__(*exc)


async def list_tools_with(config: ServerConfig, token: str) -> list[dict]:
    """The tools a per-user server lists for the holder of `token` (a sign-in just made), as
    JSON."""
    spec = config.spec
    headers = {**spec.headers, "Authorization": f"Bearer {token}"}
    client = Client(_http(spec.url, headers), mode=spec.protocol, cache=None)
    async with asyncio.timeout(CONNECT_SECONDS), client:
        tools = await _all_tools(client)
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.values()]


async def _all_tools(client: Client) -> dict[str, types.Tool]:
    """Every tool the server lists, by name, page after page (at most 100 pages)."""
    tools, cursor = {}, None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.update((tool.name, tool) for tool in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@contextlib.asynccontextmanager
async def _http(
    url: str, headers: dict[str, str], auth: httpx2.Auth | None = None
) -> AsyncIterator[tuple]:
    """Streamable HTTP through an HTTP client of its own, closed with it. No read timeout:
    the streams of events stay open while the server has nothing to say (a call has its own
    timeout, and a server that stops answering misses its pings)."""
    timeout = httpx2.Timeout(30.0, read=HTTP_READ_SECONDS)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def _watched(transport: Any, ended: Callable[[], None]) -> AsyncIterator[tuple]:
    async with transport as (read, write):
        yield _WatchedStream(read, ended), write


async def _first(*waits: Awaitable) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _describe(error: BaseException) -> str:
    """One line for people: the innermost cause of an error (the SDK wraps in groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip() or type(error).__name__
    if isinstance(error, FileNotFoundError):
        text = f"the command was not found: {error.filename or text}"
    elif isinstance(error, OSError) and error.filename and error.strerror:
        text = f"the command cannot be run: {error.strerror}: {error.filename}"
    elif isinstance(error, httpx2.ConnectError):
        text = f"cannot connect to the server: {text}"
    elif isinstance(error, httpx2.TimeoutException):
        text = "the server did not answer in time"
    return text.splitlines()[0][:300]


class Connections:
    """The servers of MCP_CONFIG, connected on this event loop."""

    def __init__(self, elicit: Elicit, tools_changed: Callable[["Connections"], None]) -> None:
        config = load()
        self.error = config.error
        self.invalid = config.invalid
        self.servers = {c.name: ServerConnection(c, elicit) for c in config.servers}
        for server in self.servers.values():
            server.tools_changed = lambda: tools_changed(self)
            server.start()

    async def ready(self) -> None:
        """Wait until every server's first attempt ended (connected or failed), at most
        FIRST_CONNECT_SECONDS."""
        for server in self.servers.values():
            if server.config.per_user:
                await server.load_listing()
        waits = [s.attempted.wait() for s in self.servers.values() if not s.attempted.is_set()]
        if waits:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FIRST_CONNECT_SECONDS):
                    await asyncio.gather(*waits)

    def status(self) -> dict:
        return {
            "error": self.error,
            "servers": [s.status() for s in self.servers.values()],
            "invalid": self.invalid,
        }

    async def close(self) -> None:
        """Disconnect every server (a stdio server's process ends), and let the last state
        published reach the cache."""
        from mcp_client import status

        for server in self.servers.values():
            if server.task is not None:
                server.task.cancel()
        await asyncio.gather(
            *(s.task for s in self.servers.values() if s.task is not None), return_exceptions=True
        )
        await status.flush(self)
