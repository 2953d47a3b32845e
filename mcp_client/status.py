"""What the MCP servers are doing, as the processes that connect to them last saw it: kept in
Django's cache, so every process's /settings/tools/ and /healthz read the same thing (with
workers, the web processes run no tools and never connect themselves)."""

import asyncio
import contextlib
import time
import weakref
from dataclasses import dataclass

import mcp_types as types
from django.core.cache import cache

from mcp_client.config import load

KEY = "mcp-client:status"


def publish(connections) -> None:
    """Store the servers' state and tools (called on the event loop; the write is not awaited:
    one writer per `connections` stores the newest state, so an older one never lands last)."""
    state = {
        "at": time.time(),
        "servers": {
            server.name: {
                "connected": server.connected,
                # Not tried yet: "connecting", not "down".
                "pending": not server.connected and not server.attempted.is_set(),
                "error": "" if server.connected else server.error,
                "tools": [row(tool) for tool in server.tools.values()],
            }
            for server in connections.servers.values()
        },
    }
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    writer = _writers.get(connections)
    if writer is None:
        writer = _writers[connections] = _Writer()
    writer.state = state
    if writer.task is None or writer.task.done():
        writer.task = loop.create_task(writer.run(), name="mcp status")


def row(tool: types.Tool) -> dict:
    """What /settings/tools/ shows of a tool: name, title, readOnly."""
    annotations = tool.annotations
    return {
        "name": tool.name,
        "title": tool.title or (annotations.title if annotations else None) or tool.name,
        "readOnly": bool(annotations and annotations.read_only_hint),
    }


def rows(listed: list[dict]) -> list[dict]:
    """`row` of each tool of a listing kept as JSON (a per-user server's, mcp_client.signin)."""
    found = []
    for tool in listed:
        with contextlib.suppress(ValueError):  # a listing the SDK no longer reads
            found.append(row(types.Tool.model_validate(tool)))
    return found


@dataclass(eq=False)
class _Writer:
    state: dict | None = None
    task: asyncio.Task | None = None

    async def run(self) -> None:
        while self.state is not None:
            state, self.state = self.state, None
            with contextlib.suppress(Exception):  # a cache that is down shows "not connected yet"
                await cache.aset(KEY, state, timeout=None)


_writers: "weakref.WeakKeyDictionary[object, _Writer]" = weakref.WeakKeyDictionary()


async def flush(connections) -> None:
    """Wait for the state published last to be stored."""
    writer = _writers.get(connections)
    if writer is not None and writer.task is not None:
        await asyncio.wait([writer.task])


def servers() -> list[dict]:
    """Each configured server: name, transport, `connected`, `error` (why not, in one line)
    and its tools (name, title, readOnly), in the file's order."""
    config = load()
    seen = cache.get(KEY) or {"servers": {}}
    listed = []
    for server in config.servers:
        state = seen["servers"].get(server.name)
        listed.append(
            {
                "name": server.name,
                "config": server,
                "transport": server.transport,
                "connected": bool(state and state["connected"]),
                "error": (state or {}).get("error", ""),
                "pending": state is None or bool(state.get("pending")),
                # No process that runs turns has tried yet (none has needed tools).
                "untried": state is None,
                "tools": (state or {}).get("tools", []),
            }
        )
    return listed


def summary() -> dict[str, str]:
    """For /healthz: each server "ok", "connecting" (its first attempt has not ended), "per user"
    (a server each user signs in to, connected per call), or why not;
    the file's own error under "MCP_CONFIG"."""
    config = load()
    found = {"MCP_CONFIG": config.error} if config.error else {}
    found.update({name: f"left out: {why}" for name, why in config.invalid.items()})
    for server in servers():
        if server["config"].per_user:
            found[server["name"]] = "per user"  # each call connects with its user's own token
        elif server["connected"]:
            found[server["name"]] = "ok"
        else:
            found[server["name"]] = "connecting" if server["pending"] else server["error"] or "down"
    return found
