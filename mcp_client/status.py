"""What the MCP servers are doing, as the processes that connect to them last saw it: kept in
Django's cache, so every process's /settings/tools/ and /healthz read the same thing (with
workers, the web processes run no tools and never connect themselves)."""

import asyncio
import contextlib
import time

from django.core.cache import cache

from mcp_client.config import load

KEY = "mcp-client:status"


def publish(connections) -> None:
    """Store the servers' state and tools (called on the event loop; the write is not awaited)."""
    state = {
        "at": time.time(),
        "servers": {
            server.name: {
                "connected": server.connected,
                "error": "" if server.connected else server.error,
                "tools": [
                    {
                        "name": tool.name,
                        "title": tool.title
                        or (tool.annotations.title if tool.annotations else None)
                        or tool.name,
                        "readOnly": bool(tool.annotations and tool.annotations.read_only_hint),
                    }
                    for tool in server.tools.values()
                ],
            }
            for server in connections.servers.values()
        },
    }
    with contextlib.suppress(RuntimeError):
        asyncio.get_running_loop().create_task(_store(state))


async def _store(state: dict) -> None:
    with contextlib.suppress(Exception):  # a cache that is down shows "not connected yet"
        await cache.aset(KEY, state, timeout=None)


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
                "pending": state is None,
                "tools": (state or {}).get("tools", []),
            }
        )
    return listed


def summary() -> dict[str, str]:
    """For /healthz: each server "ok", "connecting" (no process has tried yet), or why not;
    the file's own error under "MCP_CONFIG"."""
    config = load()
    found = {"MCP_CONFIG": config.error} if config.error else {}
    found.update({name: f"left out: {why}" for name, why in config.invalid.items()})
    for server in servers():
        if server["connected"]:
            found[server["name"]] = "ok"
        else:
            found[server["name"]] = "connecting" if server["pending"] else server["error"] or "down"
    return found
