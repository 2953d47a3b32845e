"""Kill the server with SIGKILL in the middle of a turn; start it again; the turn completes
exactly once: one reply per step, each tool call stored once with exactly one result. Runs on
SQLite and PostgreSQL (the `database_url` fixture of conftest.py)."""

import json
import subprocess
import sys

import pytest

from tests.live_server import ROOT, START, LiveServer, wait_for

pytestmark = pytest.mark.live


@pytest.mark.parametrize("kill_during", ["first step", "final step"])
def test_a_turn_killed_mid_run_completes_exactly_once_after_restart(
    tmp_path, database_url, kill_during
):
    server = LiveServer(
        tmp_path,
        database_url=database_url,
        SCRIPTED_AGENT_DELAY="0.08",
        PARLEY_LEASE_SECONDS="2",
        PARLEY_SWEEP_SECONDS="0.3",
    )
    server.set_up_database()
    server.start()
    try:
        # Posted from another process: the server's sweep finds the turn and runs it, maybe
        # before that process has even exited, so the step is watched for from the start.
        posting = subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", START],
            cwd=ROOT,
            env=server.env,
            stdout=subprocess.PIPE,
            text=True,
        )

        def draft_of_step(step: int) -> bool:
            return bool(
                server.query(  # of the only conversation of this new database
                    "SELECT 1 FROM chat_conversation c JOIN chat_message m "
                    "ON m.conversation_id = c.id "
                    "WHERE c.turn_steps = %s AND m.is_draft",
                    step,
                )
            )

        step = 1 if kill_during == "first step" else 2
        wait_for(lambda: draft_of_step(step), 20, f"the {kill_during} to stream")
        server.stop(kill=True)
        conversation_id = int(posting.communicate(timeout=60)[0].strip())
        assert posting.returncode == 0

        server.start()
        wait_for(
            lambda: (
                server.query(
                    "SELECT agent_state FROM chat_conversation WHERE id = %s", conversation_id
                )
                == [("idle",)]
            ),
            30,
            "the resumed turn to finish",
        )
    finally:
        server.stop()

    rows = server.query(
        "SELECT role, blocks, is_draft FROM chat_message WHERE conversation_id = %s "
        'ORDER BY "order"',
        conversation_id,
    )
    roles = [role for role, _, _ in rows]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"], rows
    assert not any(is_draft for _, _, is_draft in rows)
    blocks = [json.loads(raw) if isinstance(raw, str) else raw for _, raw, _ in rows]
    calls = [b["id"] for bs in blocks for b in bs if b["type"] == "tool_call"]
    results = [b["tool_call_id"] for bs in blocks for b in bs if b["type"] == "tool_result"]
    assert len(calls) == 2
    assert sorted(results) == sorted(calls)
    assert blocks[1][0] == {"type": "text", "text": "Let me check the clock and do the arithmetic."}
    final = blocks[4][0]["text"]
    assert final.startswith("It is **") and final.endswith("Two tools, one turn.")
    assert "6 × 7 = **42**" in final
