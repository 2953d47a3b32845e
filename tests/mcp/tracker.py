"""tests/mcp/signin_server.py as the tests run it: on a port of its own, named "tracker" in an
MCP_CONFIG with `"auth": "oauth"` and its tools allowed."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.live_server import free_port, wait_for

SERVER = str(Path(__file__).with_name("signin_server.py"))


class Tracker:
    """tests/mcp/signin_server.py on a port of its own."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, SERVER, "--port", str(self.port)],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.log = log
        wait_for(self._answers, 30, "the sign-in server")

    def _answers(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stats(self) -> dict:
        return httpx.get(f"{self.base}/stats").json()

    def post(self, what: str, account: str) -> None:
        httpx.post(f"{self.base}/{what}", params={"account": account}).raise_for_status()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def config(self, folder: Path) -> Path:
        """An MCP_CONFIG file naming this server "tracker", its tools run without asking."""
        entry = {"url": f"{self.base}/mcp", "auth": "oauth", "approval": {"default": "allow"}}
        path = folder / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"tracker": entry}}))
        return path
