"""A tiny MCP server whose tool list changes, and which can die on request: what the tests of
Parley's connections to MCP servers (tests/mcp/test_connections.py) drive.

    python tests/mcp/changing_server.py                    # stdio (default)
    python tests/mcp/changing_server.py --http --port N    # streamable HTTP at /mcp
    python tests/mcp/changing_server.py --mute             # starts, and never answers

Tools:
- `echo(text)` (read-only) answers with `text`.
- `add_tool(name)` adds a read-only tool `name` (it answers "<name> ran") and tells the client
  that the tool list changed: on the legacy protocol (2025-11-25 and earlier) with a
  `notifications/tools/list_changed` on the session; from 2026-07-28 on, which has no
  server-to-client channel outside a request, as an event on the `subscriptions/listen`
  streams the clients opened.
- `wait(seconds)` answers after `seconds` (the server goes on answering everything else).
- `crash()` ends the process at once (os._exit), without an answer.
- `freeze()` blocks the server's event loop for an hour: it answers nothing any more, pings
  included, and is still running.
"""

import argparse
import os
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

server = MCPServer("changing")

READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY, structured_output=False)
def echo(text: str) -> str:
    """Answer with `text`."""
    return text


@server.tool(structured_output=False)
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name`, and tell the client that the tool list changed."""

    def added() -> str:
        return f"{name} ran"

    server.add_tool(
        added,
        name=name,
        description=f"A tool added at run time: {name}.",
        annotations=READ_ONLY,
        structured_output=False,
    )
    if ctx.request_context.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.request_context.session.send_tool_list_changed()
    return f"Added {name}"


@server.tool(structured_output=False)
async def wait(seconds: float) -> str:
    """Answer after `seconds`."""
    await anyio.sleep(seconds)
    return f"Waited {seconds:g} seconds"


@server.tool(structured_output=False)
def crash() -> str:
    """End the server's process at once."""
    os._exit(3)


@server.tool(structured_output=False)
async def freeze() -> str:
    """Stop answering anything (the event loop blocks for an hour)."""
    time.sleep(3600)  # noqa: ASYNC251 (the point: nothing else runs)
    return "Awake"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An MCP server whose tools change (tests).")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--mute", action="store_true", help="read nothing, answer nothing")
    args = parser.parse_args(argv)
    if args.mute:
        time.sleep(3600)
    elif args.http:
        server.run("streamable-http", host=args.host, port=args.port, streamable_http_path="/mcp")
    else:
        server.run()


if __name__ == "__main__":
    main()
