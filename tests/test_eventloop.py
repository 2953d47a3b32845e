"""daphne and the workers run on uvloop (chat/engine/eventloop.py)."""

import asyncio
import subprocess
import sys

from chat.management.commands import worker
from tests.live_server import ROOT


def test_the_server_runs_on_uvloop():
    """config.serve installs Twisted's reactor on uvloop's loop before daphne would install
    it on asyncio's own (an import of daphne.server ahead of it would undo that)."""
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import config.serve\n"
            "from twisted.internet import reactor\n"
            "print(type(reactor._asyncioEventloop).__module__)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert shown.stdout.split() == ["uvloop"]


def test_the_worker_runs_on_uvloop(monkeypatch, settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    loops = []

    async def serve(self):
        loops.append(type(asyncio.get_running_loop()).__module__)

    monkeypatch.setattr(worker.Command, "serve", serve)
    worker.Command().handle()
    assert loops == ["uvloop"]
