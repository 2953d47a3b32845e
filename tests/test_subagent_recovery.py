"""Kill the server with SIGKILL while two sub-agents stream; start it again: every child
completes exactly once, and the parent records its one result and replies exactly once."""

import json

import pytest

from tests.live_server import LiveServer, wait_for

pytestmark = pytest.mark.live

START_RESEARCH = """
from django.contrib.auth.models import User
from chat import services
conversation = services.create_conversation(owner=User.objects.get(username="demo"))
services.post_user_message(user=conversation.owner, conversation_id=conversation.pk,
                           text="research")
print(conversation.pk)
"""


def rows_of(server, conversation_id):
    rows = server.query(
        "SELECT role, blocks, is_draft FROM chat_message WHERE conversation_id = %s "
        'ORDER BY "order"',
        conversation_id,
    )
    return [(role, json.loads(b) if isinstance(b, str) else b, draft) for role, b, draft in rows]


def test_sigkill_while_subagents_run_completes_everything_once(tmp_path, database_url):
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
        parent = int(server.manage("shell", "-v", "0", "-c", START_RESEARCH).strip())

        def both_children_streaming() -> bool:
            streaming = server.query(
                "SELECT DISTINCT c.id FROM chat_conversation c JOIN chat_message m "
                "ON m.conversation_id = c.id WHERE c.parent_id = %s AND m.is_draft",
                parent,
            )
            return len(streaming) == 2

        wait_for(both_children_streaming, 30, "both sub-agents to stream")
        server.stop(kill=True)
        [(state,)] = server.query("SELECT agent_state FROM chat_conversation WHERE id = %s", parent)
        assert state == "tool_executing"

        server.start()
        wait_for(
            lambda: (
                server.query(
                    "SELECT agent_state, lease_owner FROM chat_conversation WHERE id = %s", parent
                )
                == [("idle", "")]
            ),
            60,
            "the parent to finish",
        )
    finally:
        server.stop()

    children = server.query(
        "SELECT id, agent_state, parent_tool_call_id FROM chat_conversation "
        "WHERE parent_id = %s ORDER BY subagent_index",
        parent,
    )
    assert [state for _, state, _ in children] == ["idle", "idle"]
    for child_id, _, _ in children:
        rows = rows_of(server, child_id)
        assert [role for role, _, _ in rows] == ["user", "assistant", "tool", "assistant"], rows
        assert not any(draft for _, _, draft in rows)
        [call] = [b for _, blocks, _ in rows for b in blocks if b["type"] == "tool_call"]
        results = [b for _, blocks, _ in rows for b in blocks if b["type"] == "tool_result"]
        assert [r["tool_call_id"] for r in results] == [call["id"]]

    rows = rows_of(server, parent)
    assert [role for role, _, _ in rows] == ["user", "assistant", "tool", "assistant"], rows
    assert not any(draft for _, _, draft in rows)
    [spawn] = [b for b in rows[1][1] if b["type"] == "tool_call"]
    assert {tool_call_id for _, _, tool_call_id in children} == {spawn["id"]}
    [result] = rows[2][1]
    assert result["tool_call_id"] == spawn["id"] and not result["is_error"]
    assert result["content"].startswith("Sub-agent 1 (Clock) finished:\nThe current time in UTC")
    assert "Sub-agent 2 (Arithmetic) finished:\nSix times seven is **42**" in result["content"]
    final = rows[3][1][0]["text"]
    assert final.startswith("Both sub-agents reported back.") and final.count("Sub-agent") == 2
