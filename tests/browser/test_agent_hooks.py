"""Claude Code's permission prompt denied in the browser: the real, pinned `claude -p`
(tools/agents) posts its PermissionRequest hook, configured as Settings shows it, to the live
server; the person finds the approval in their inbox, reads the command, and denies it with
feedback; nothing runs, and the model reads the feedback."""

import json
import re
import secrets
import subprocess
from datetime import UTC, datetime

from playwright.sync_api import expect

from api.tokens import PREFIX, digest
from tests.browser.pages import log_in
from tests.fake_llm import FakeLLM
from tests.mcp.conftest import ROOT, Claude, execute


def token_for(server, username: str) -> str:
    token = PREFIX + secrets.token_urlsafe(32)
    [(user_id,)] = server.query("SELECT id FROM auth_user WHERE username = %s", username)
    execute(
        server,
        "INSERT INTO api_apitoken (name, prefix, digest, created_at, user_id) "
        "VALUES ('claude', %s, %s, %s, %s)",
        token[:13],
        digest(token),
        datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f"),
        user_id,
    )
    return token


def test_a_command_is_denied_with_feedback_from_the_inbox(page, parley_server, person, tmp_path):
    subprocess.run(["make", "-s", "agents"], cwd=ROOT, check=True)
    name, password = person
    model = FakeLLM()
    try:
        claude = Claude(parley_server, token_for(parley_server, name), model, tmp_path)
        ran = claude.project / "ran"
        arguments = json.dumps({"command": f"touch {ran}", "description": "Make a marker file"})
        model.queue(
            {"tool_calls": [{"id": "toolu_01", "name": "Bash", "arguments": arguments}]},
            {"text": "done"},
        )
        process = claude.start()
        try:
            log_in(page, name, password)
            page.get_by_role("link", name=re.compile("^Questions")).click()
            approval = page.get_by_role("group", name="Run a command")
            description = approval.get_by_text("Make a marker file", exact=True)
            expect(description).to_be_visible(timeout=30_000)
            expect(approval.get_by_text(f"touch {ran}", exact=True)).to_be_visible()
            approval.get_by_role("textbox", name="Feedback").fill("Not in this folder")
            approval.get_by_role("button", name="Deny", exact=True).click()
            expect(approval.get_by_role("button", name="Deny", exact=True)).to_have_count(0)
            claude.finish()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert not ran.exists()
        [result] = [
            block
            for block in model.requests[-1]["body"]["messages"][-1]["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        assert "Not in this folder" in json.dumps(result["content"])
    finally:
        model.close()
