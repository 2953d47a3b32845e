"""Flood: how much one user's flood slows another user's turn, against the default per-user
limits: 200 messages at once over 20 conversations and 300 event streams from one user, while
another user's turn (the scripted agent, paced like a model: about 2.5 s) runs on the same
daphne process (SQLite, in-memory layer). tests/test_limits_live.py checks that the flood is
refused past the limits; this times the other user's turn alone and under the flood."""

import tempfile
from pathlib import Path

from tests.live_clients import FLOOD_ENV, flood_scenario
from tests.live_server import LiveServer


def run(model_url: str) -> dict:
    server = LiveServer(Path(tempfile.mkdtemp(prefix="parley-bench-flood-")), **FLOOD_ENV)
    server.set_up_database()
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "User.objects.create_user('victim', password='pw-victim-123')",
    )
    server.start()
    try:
        result = flood_scenario(server)
    finally:
        server.stop()
    return {
        "alone_s": round(result["baseline"], 2),
        "flooded_s": round(result["flooded"], 2),
        "ratio": round(result["flooded"] / result["baseline"], 2),
        "messages": {str(code): n for code, n in result["messages"].items()},
        "streams": {str(code): n for code, n in result["streams"].items()},
    }
