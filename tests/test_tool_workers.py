"""Tools from an MCP server in the documented topology: with REDIS_URL, the web process runs
no turns and never connects to the servers; a `manage.py worker` does both. Its approvals
are decided through the web process, its tool's form is answered there while the worker's
call waits (over Redis), and the web process's /healthz reports the worker's connection."""

import httpx
import pytest

from tests.live_server import LiveServer, RedisServer, wait_for
from tests.notes_server import notes_config, writes

pytestmark = pytest.mark.live


def test_a_worker_runs_the_tools_and_the_web_process_takes_the_decisions(tmp_path):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    with notes_config(tmp_path, "stdio") as (config, notes):
        server = LiveServer(
            tmp_path, REDIS_URL=redis.url, MCP_CONFIG=str(config), SCRIPTED_AGENT_DELAY="0"
        )
        server.set_up_database()
        server.start()
        worker = server.start_worker()
        try:
            token = server.manage("create_api_token", "demo").strip()
            api = httpx.Client(
                base_url=f"{server.url}/api/v1",
                headers={"Authorization": f"Bearer {token}"},
                timeout=60,
            )
            conversation = api.post("/conversations", json={}).json()["id"]
            paused = api.post(
                f"/conversations/{conversation}/messages",
                json={"content": "Save a note", "wait": 30},
            ).json()
            assert paused["status"] == "needs_input", paused
            approval = paused["pendingQuestion"]
            assert approval["approval"]["name"] == "mcp__notes__write_note"
            # The worker connected; the web process reads its state from the shared cache.
            health = httpx.get(f"{server.url}/healthz").json()
            assert health["mcpServers"] == {"notes": "ok"}
            done = api.post(
                f"/conversations/{conversation}/approvals/{approval['toolCallId']}",
                json={"decision": "allow", "wait": 30},
            ).json()
            assert done["status"] == "complete", done
            assert "Saved shopping" in done["response"]
            assert writes(notes) == ["write shopping"]

            # A form the worker's running call waits for, answered through the web process.
            conversation = api.post("/conversations", json={}).json()["id"]
            asking = api.post(
                f"/conversations/{conversation}/messages",
                json={"content": "Make a note from a form", "wait": 30},
            ).json()
            [form] = asking["pendingQuestions"]
            assert form["tool"] == "elicitation"
            answered = api.post(
                f"/conversations/{conversation}/elicitations/{form['toolCallId']}",
                json={
                    "action": "accept",
                    "content": {"name": "worker", "text": "Over Redis", "colour": "red"},
                    "wait": 30,
                },
            ).json()
            wait_for(lambda: (notes / "worker.md").exists(), 15, "the note")
            assert (notes / "worker.md").read_text() == "Over Redis"
            assert answered["status"] in ("running", "complete")
        finally:
            worker.kill()
            worker.wait()
            server.stop()
            redis.stop()
