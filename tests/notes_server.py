"""The example notes server (examples/notes_server.py) as the tests run it: an MCP_CONFIG that
names it over stdio (Parley starts it) or over streamable HTTP (a server of its own)."""

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.live_server import ROOT, free_port, wait_for

NOTES_SERVER = str(ROOT / "examples" / "notes_server.py")


def writes(notes: Path) -> list[str]:
    """What the server really did, one line per write ("start <name>", "write <name>")."""
    log = notes / ".writes.log"
    return log.read_text().splitlines() if log.exists() else []


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def notes_config(
    workdir: Path, transport: str, *, protocol: str = "auto"
) -> Iterator[tuple[Path, Path]]:
    """(the MCP_CONFIG file, the notes directory) for the notes server over `transport`, in
    `protocol` (auto: the newest both speak; legacy: the initialize handshake). As in
    examples/mcp.json, the form tool runs without an approval first (it asks for its details
    itself)."""
    notes = workdir / "notes"
    helper = None
    if transport == "stdio":
        entry = {"command": sys.executable, "args": [NOTES_SERVER]}
        entry["env"] = {"NOTES_DIR": str(notes)}
    else:
        port = free_port()
        helper = subprocess.Popen(
            [sys.executable, NOTES_SERVER, "--http", "--port", str(port)],
            env={"PATH": "/usr/bin:/bin", "NOTES_DIR": str(notes)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        entry = {"url": f"http://127.0.0.1:{port}/mcp"}
        wait_for(lambda: _answers(port), 20, "the notes server over HTTP")
    entry["approval"] = {"tools": {"new_note_from_form": "allow"}}
    entry["protocol"] = protocol
    config = workdir / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    try:
        yield config, notes
    finally:
        if helper is not None:
            helper.terminate()
            helper.wait(10)
