"""The MCP endpoint as deployed: two daphne processes on PostgreSQL and Redis behind deploy/'s
nginx. Each MCP session stays on the process that opened it; a call waiting on one process
hears of the answer given through the other."""

import asyncio
import os
import random

import pytest

from tests.live_server import LiveServer, Nginx, postgres_database
from tests.mcp.conftest import Progress, add_account, api, mcp_client, pending

pytestmark = [pytest.mark.live]

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
SESSIONS = 6
# nginx's proxy_read_timeout here for the locations that do not set their own.
NGINX_READ_TIMEOUT = 3


@pytest.fixture
def deployed(tmp_path):
    with postgres_database(POSTGRES_URL) as database_url:
        env = {"REDIS_URL": f"{REDIS}/{random.randint(1, 15)}", "MCP_PROGRESS_SECONDS": "0.2"}
        web = []
        for name in ("web1", "web2"):
            (tmp_path / name).mkdir()
            web.append(LiveServer(tmp_path / name, database_url=database_url, **env))
        web[0].set_up_database()
        nginx = Nginx(
            tmp_path / "nginx",
            web=[w.url.removeprefix("http://") for w in web],
            static_root=tmp_path / "static",
            read_timeout=f"{NGINX_READ_TIMEOUT}s",
        )
        try:
            for server in web:
                server.start()
            nginx.start()
            yield web, nginx
        finally:
            nginx.stop()
            for server in web:
                server.stop()


async def test_sessions_through_nginx_stay_on_their_process(deployed):
    web, nginx = deployed
    account = add_account(web[0], "ada")

    async def one(number: int, user) -> dict:
        progress = Progress()
        async with mcp_client(nginx.url, account.token, name=f"Agent {number}") as session:
            await session.list_tools()
            text = f"Question {number}?"
            arguments = {
                "questions": [{"question": text, "options": [{"label": "A"}, {"label": "B"}]}]
            }
            waiting = asyncio.create_task(
                session.call_tool("ask_user_question", arguments, progress_callback=progress)
            )
            await progress.next()
            [question] = [q for q in await pending(user) if q["questions"][0]["question"] == text]
            answered = await user.post(
                f"/conversations/{question['conversationId']}/respond",
                json={"answers": {text: "B"}},
            )
            assert answered.status_code == 200, answered.text
            return (await asyncio.wait_for(waiting, 15)).structured_content

    # The answers go through the other process than nginx picks for a session, half the time.
    async with api(web[1].url, account) as user:
        found = await asyncio.gather(*(one(n, user) for n in range(SESSIONS)))
    assert found == [{"answers": {f"Question {n}?": "B"}} for n in range(SESSIONS)]
    assert "Session not found" not in nginx.error_log()


# Past the proxy_read_timeout that nginx's configuration sets here for every location
# without one of its own (nginx's default is 60 s): the template's /mcp/ sets its own.
IDLE_SECONDS = NGINX_READ_TIMEOUT + 2


async def test_a_call_waits_idle_past_nginxs_read_timeout_and_returns_the_answer(deployed):
    """No progress token: nothing at all crosses the connection while the person thinks."""
    web, nginx = deployed
    account = add_account(web[0], "grace")
    text = "Ship it?"
    arguments = {"questions": [{"question": text, "options": [{"label": "Yes"}, {"label": "No"}]}]}
    async with (
        mcp_client(nginx.url, account.token, name="Slow agent", read_timeout=120) as session,
        api(web[1].url, account) as user,
    ):
        waiting = asyncio.create_task(session.call_tool("ask_user_question", arguments))
        with pytest.raises(TimeoutError):  # still waiting, past the read timeout
            await asyncio.wait_for(asyncio.shield(waiting), IDLE_SECONDS)
        [question] = await pending(user)
        answered = await user.post(
            f"/conversations/{question['conversationId']}/respond",
            json={"answers": {text: "Yes"}},
        )
        assert answered.status_code == 200, answered.text
        result = await asyncio.wait_for(waiting, 15)
    assert not result.is_error
    assert result.structured_content == {"answers": {text: "Yes"}}
    assert "upstream timed out" not in nginx.error_log()  # one response, never cut and re-sent
