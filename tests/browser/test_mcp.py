"""An outside agent's question answered in the browser: the agent calls Parley's MCP endpoint
with the SDK's client, the person answers in the inbox with a click, the call returns it."""

import asyncio
import re
import secrets
import threading
from datetime import UTC, datetime

from playwright.sync_api import expect

from api.tokens import PREFIX, digest
from tests.browser.pages import log_in
from tests.mcp.conftest import execute, mcp_client

PIZZA = {
    "questions": [
        {
            "question": "Which pizza for the demo?",
            "header": "Agent pizza",
            "options": [{"label": "Funghi"}, {"label": "Pepperoni"}],
        }
    ]
}


def demo_token(server) -> str:
    token = PREFIX + secrets.token_urlsafe(32)
    [(user_id,)] = server.query("SELECT id FROM auth_user WHERE username = 'demo'")
    execute(
        server,
        "INSERT INTO api_apitoken (name, prefix, digest, created_at, user_id) "
        "VALUES ('agent', %s, %s, %s, %s)",
        token[:13],
        digest(token),
        datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f"),
        user_id,
    )
    return token


def test_an_agents_question_is_answered_in_the_inbox(page, parley_server):
    token = demo_token(parley_server)
    outcome = {}

    async def agent():
        async with mcp_client(parley_server.url, token, name="Browser agent") as session:
            return await asyncio.wait_for(session.call_tool("ask_user_question", PIZZA), 30)

    # The agent runs on a loop of its own thread (Playwright's sync API holds this one's).
    thread = threading.Thread(target=lambda: outcome.update(result=asyncio.run(agent())))
    thread.start()
    log_in(page)
    page.get_by_role("link", name=re.compile("^Questions")).click()
    # Other tests share the demo user and may leave the scripted agent's "Pizza" pending.
    question = page.get_by_role("group", name="Agent pizza", exact=True)
    expect(question.get_by_text("Which pizza for the demo?")).to_be_visible()
    question.get_by_role("button", name="Pepperoni", exact=True).click()
    expect(question.get_by_role("button", name="Pepperoni", exact=True)).to_have_count(0)
    thread.join(15)
    result = outcome["result"]
    assert result.structured_content == {"answers": {"Which pizza for the demo?": "Pepperoni"}}
    assert result.meta["parley/question"]["answeredVia"] == "browser"
