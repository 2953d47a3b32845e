"""Flood: how much one user's flood slows another user's turn, against the default per-user
limits: 200 messages at once over 20 conversations and 300 event streams from one user, while
another user's turn (the scripted agent, paced like a model: about 2.5 s) runs on the same
daphne process (SQLite, in-memory layer). tests/test_limits_live.py checks that the flood is
refused past the limits; this times the other user's turn alone and under the flood."""

import tempfile
from pathlib import Path

from tests.live_clients import flood_scenario, flood_server


def run(model_url: str) -> dict:
    with flood_server(Path(tempfile.mkdtemp(prefix="parley-bench-flood-"))) as server:
        result = flood_scenario(server)
    return {
        "alone_s": round(result["baseline"], 2),
        "flooded_s": round(result["flooded"], 2),
        "ratio": round(result["flooded"] / result["baseline"], 2),
        "messages": {str(code): n for code, n in result["messages"].items()},
        "streams": {str(code): n for code, n in result["streams"].items()},
    }
