"""An example MCP server: notes kept as Markdown files in one sandbox directory.

Parley's agent uses it as a demo, and the tests in tests/mcp/test_notes_server.py drive it.
It is built on the official `mcp` SDK (2.x, `MCPServer`), and needs a POSIX system (O_NOFOLLOW).

    NOTES_DIR=/tmp/notes python examples/notes_server.py                   # stdio (default)
    NOTES_DIR=/tmp/notes python examples/notes_server.py --http --port 8765 [--host 127.0.0.1]
                                                  # streamable HTTP at http://HOST:PORT/mcp

The sandbox:
- NOTES_DIR (required) is the only directory the server touches; it is created if missing.
- A note is addressed by its name alone and stored as NOTES_DIR/<name>.md. Names that could
  point anywhere else (separators, "..", absolute paths) are refused, and no file operation
  follows a symlink: a symlink planted in NOTES_DIR is neither read through nor written through.
- Every successful write appends "write <name>" to NOTES_DIR/.writes.log (slow_write also
  "start <name>" before it waits), so a test can count how many writes really happened.
"""

import argparse
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

MAX_NAME = 100
WRITES_LOG = ".writes.log"

server = MCPServer("notes", instructions="Notes kept as Markdown files, addressed by name.")


def sandbox() -> Path:
    """NOTES_DIR, created if missing. NOTES_DIR itself may be a symlink (the operator chose it);
    only what lies inside it is guarded."""
    directory = os.environ.get("NOTES_DIR")
    if not directory:
        raise ToolError("The server has no NOTES_DIR: set it to the notes directory.")
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def note_path(name: str) -> Path:
    """NOTES_DIR/<name>.md for a valid note name; ToolError naming the problem otherwise."""
    if not name:
        raise ToolError("A note name must not be empty.")
    if len(name) > MAX_NAME:
        raise ToolError(f"A note name must be at most {MAX_NAME} characters long.")
    if os.path.isabs(name) or "/" in name or "\\" in name:
        raise ToolError(f"Invalid note name {name!r}: a name, not a path (no '/' or '\\').")
    if ".." in name:
        raise ToolError(f"Invalid note name {name!r}: it must not contain '..'.")
    # NUL, and every other control character: names are listed and logged one per line.
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ToolError(f"Invalid note name {name!r}: no control characters.")
    return sandbox() / f"{name}.md"


def log_write(event: str, name: str) -> None:
    """Append "<event> <name>" to NOTES_DIR/.writes.log (never through a symlink)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    fd = os.open(sandbox() / WRITES_LOG, flags, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as log:
        log.write(f"{event} {name}\n")


def save(name: str, text: str) -> int:
    """Create or replace the note, atomically, and log the write; returns its length.

    The text goes to a new temporary file in NOTES_DIR (mkstemp opens with O_EXCL, so never
    through a symlink), which then replaces the note: a rename replaces a symlink at the
    note's name rather than writing through it, and an interrupted write leaves the old note."""
    path = note_path(name)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    log_write("write", name)
    return len(text)


def tool(title: str, *, read_only: bool, destructive: bool | None = None):
    """Register a tool with its title and hints for clients. The title is repeated in the
    annotations for clients that predate Tool.title; openWorldHint is false as nothing leaves
    the sandbox. Results are plain text (no structured output)."""
    hints = ToolAnnotations(
        title=title, read_only_hint=read_only, destructive_hint=destructive, open_world_hint=False
    )
    return server.tool(title=title, annotations=hints, structured_output=False)


@tool("List notes", read_only=True)
def list_notes() -> str:
    """List the names of all notes, one per line."""
    root = sandbox()
    names = sorted(
        entry.name.removesuffix(".md")
        for entry in os.scandir(root)
        # Regular files only: a symlink named like a note is not one.
        if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False)
    )
    return "\n".join(names) if names else "No notes yet."


@tool("Read note", read_only=True)
def read_note(name: str) -> str:
    """Return the text of the note called `name`."""
    path = note_path(name)
    try:
        # O_NONBLOCK: a FIFO planted under a note's name must not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"No note called {name!r}.") from None
    except OSError:  # ELOOP (a symlink), or not readable
        raise ToolError(f"The note {name!r} cannot be read.") from None
    with os.fdopen(fd, encoding="utf-8") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise ToolError(f"The note {name!r} cannot be read.")
        return file.read()


@tool("Write note", read_only=False, destructive=False)
def write_note(name: str, text: str) -> str:
    """Create the note called `name`, or replace its text."""
    return f"Saved {name} ({save(name, text)} characters)"


@tool("Delete note", read_only=False, destructive=True)
def delete_note(name: str) -> str:
    """Delete the note called `name`."""
    path = note_path(name)
    try:
        # unlink never follows a symlink: at worst it removes a link planted in the sandbox.
        path.unlink()
    except FileNotFoundError:
        raise ToolError(f"No note called {name!r}.") from None
    return f"Deleted {name}"


@tool("Slow write", read_only=False, destructive=False)
async def slow_write(
    name: str,
    text: str,
    seconds: Annotated[float, Field(ge=0, le=60, description="How long to wait first")] = 5,
) -> str:
    """Like write_note, but wait `seconds` first (a long call to interrupt, for tests)."""
    note_path(name)  # refuse a bad name before logging or waiting
    log_write("start", name)
    # If the call is cancelled while it waits (the server ends it when the client goes away),
    # nothing is written; otherwise the note is written once.
    await anyio.sleep(seconds)
    return f"Saved {name} ({save(name, text)} characters)"


# The form new_note_from_form shows the user: a field of each kind a form allows. Only name
# and text are stored (and the tags said in the answer); the others show how booleans, bounded
# integers, choices and several choices render.
# (No docstring: it would be sent as the form's description.)
class NoteForm(BaseModel):
    name: str = Field(title="Note name", description="A short name", max_length=60)
    text: str = Field(title="Text")
    pinned: bool = Field(default=False, title="Pinned")
    priority: int = Field(default=3, ge=1, le=5, title="Priority")
    colour: Literal["red", "green", "blue"] = Field(title="Colour")
    tags: list[Literal["work", "home", "urgent"]] = Field(default=[], title="Tags", max_length=2)


def ask_for_note() -> Elicit[NoteForm]:
    """The question behind new_note_from_form's `form` parameter.

    A resolver (not `ctx.elicit`), because the SDK then carries the question in whichever way
    the connection's protocol needs: on 2025-11-25 and earlier, an elicitation/create request
    sent while the call waits (what `ctx.elicit` does); from 2026-07-28, which has no
    server-to-client requests, an input-required result, and the client calls again with the
    answer. The tool body runs once, with the answer, in both."""
    return Elicit("Details for the new note", NoteForm)


@tool("New note (asks for details)", read_only=False, destructive=False)
def new_note_from_form(
    form: Annotated[ElicitationResult[NoteForm], Resolve(ask_for_note)],
) -> str:
    """Ask the user for a new note's name and text in a form, then save it."""
    if form.action == "decline":
        return "The user declined: nothing saved."
    if form.action == "cancel":
        return "The user cancelled: nothing saved."
    save(form.data.name, form.data.text)
    tagged = f", tagged {', '.join(form.data.tags)}" if form.data.tags else ""
    return f"Saved {form.data.name} from the form{tagged}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Notes MCP server (example).")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if not os.environ.get("NOTES_DIR"):
        sys.exit("notes_server: set NOTES_DIR to the directory for the notes.")
    sandbox()
    if args.http:
        # uvicorn serving MCPServer.streamable_http_app(); on 127.0.0.1/localhost the SDK
        # also checks Host and Origin headers (DNS rebinding protection).
        server.run("streamable-http", host=args.host, port=args.port, streamable_http_path="/mcp")
    else:
        server.run()


if __name__ == "__main__":
    main()
