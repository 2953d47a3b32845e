"""Safe re-issue and waiting without one long call, on Parley's MCP server, with the SDK's own
client against a live server: `request_key` (the same user and key: the same question, never
a second), `wait=false`, and `get_answer` (pending, or the answer, waiting up to wait_s)."""

import asyncio

import pytest

from tests.mcp.conftest import Progress, api, mcp_client, pending

pytestmark = pytest.mark.live

PIZZA = {
    "questions": [
        {
            "question": "Which pizza?",
            "header": "Pizza",
            "options": [{"label": "Funghi"}, {"label": "Pepperoni", "description": "Spicy"}],
        }
    ]
}


def rows(server, key: str) -> int:
    [(count,)] = server.query(
        "SELECT COUNT(*) FROM questions_question q JOIN mcp_server_agentcall c "
        "ON c.question_id = q.id WHERE c.request_key = %s",
        key,
    )
    return count


async def answer(user, question, label):
    response = await user.post(
        f"/conversations/{question['conversationId']}/respond",
        json={"answers": {"Which pizza?": label}},
    )
    assert response.status_code == 200, response.text


async def test_wait_false_then_get_answer(mcp_live, account):
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        asked = await session.call_tool("ask_user_question", {**PIZZA, "wait": False})
        assert not asked.is_error
        assert asked.structured_content["status"] == "pending"
        question_id = asked.structured_content["questionId"]
        still = await session.call_tool("get_answer", {"questionId": question_id, "wait_s": 0.5})
        assert still.structured_content == {"status": "pending", "questionId": question_id}
        waiting = asyncio.create_task(
            session.call_tool("get_answer", {"questionId": question_id, "wait_s": 30})
        )
        [question] = await pending(user)
        await answer(user, question, "Funghi")
        result = await asyncio.wait_for(waiting, 15)
    assert result.structured_content == {"answers": {"Which pizza?": "Funghi"}}


async def test_a_call_cut_after_two_seconds_and_reissued_with_its_key_asks_once(mcp_live, account):
    key = f"deploy-{account.user_id}"
    progress = Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        first = asyncio.create_task(
            session.call_tool(
                "ask_user_question", {**PIZZA, "request_key": key}, progress_callback=progress
            )
        )
        await progress.next()
        await asyncio.sleep(2)  # the client gives up on the long call after 2 s
        first.cancel()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        again = asyncio.create_task(
            session.call_tool("ask_user_question", {**PIZZA, "request_key": key})
        )
        [question] = await pending(user)
        await answer(user, question, "Pepperoni")
        result = await asyncio.wait_for(again, 15)
        assert result.structured_content == {"answers": {"Which pizza?": "Pepperoni"}}
        # Once answered, the key returns the answer at once, however often it is called.
        later = await session.call_tool("ask_user_question", {**PIZZA, "request_key": key})
        assert later.structured_content == {"answers": {"Which pizza?": "Pepperoni"}}
    assert rows(mcp_live, key) == 1


async def test_get_answer_is_only_for_ones_own_questions(mcp_live, account):
    from tests.mcp.conftest import add_account

    other = add_account(mcp_live, f"eve-{account.user_id}")
    async with mcp_client(mcp_live.url, account.token) as session:
        asked = await session.call_tool("ask_user_question", {**PIZZA, "wait": False})
    question_id = asked.structured_content["questionId"]
    async with mcp_client(mcp_live.url, other.token) as theirs:
        refused = await theirs.call_tool("get_answer", {"questionId": question_id})
        bad = await theirs.call_tool("get_answer", {"questionId": question_id, "wait_s": 90})
    assert refused.is_error and "No question of yours" in refused.content[0].text
    assert bad.is_error and "wait_s" in bad.content[0].text
