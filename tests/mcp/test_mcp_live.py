"""Parley as an MCP server, end to end: the SDK's own client against a real daphne, the user
answering through the JSON API (Parley's services, as the terminal client and scripts do)."""

import asyncio
import json

import httpx
import pytest
from mcp.shared.message import ClientMessageMetadata
from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

from tests.live_server import LiveServer
from tests.mcp.conftest import (
    CLIENT,
    Progress,
    Proxy,
    add_account,
    api,
    mcp_client,
    mcp_client_resumed,
    pending,
    session_id,
)

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


def call(session, arguments=PIZZA, tool="ask_user_question", progress=None):
    """The call as a task: it waits until the user answers."""
    return asyncio.create_task(session.call_tool(tool, arguments, progress_callback=progress))


async def test_no_token_is_401_and_a_bad_token_too(mcp_live):
    async with httpx.AsyncClient(base_url=mcp_live.url) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers in ({}, {"Authorization": "Bearer parley_not-a-token"}):
            response = await client.post("/mcp/", json=body, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"] == "invalid_token"
            assert response.headers["www-authenticate"].startswith("Bearer ")


async def test_lists_the_question_tools_and_get_answer(mcp_live, account):
    async with mcp_client(mcp_live.url, account.token) as session:
        assert session.initialize_result.server_info.name == "parley"
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"ask_user_question", "confirm_action", "get_answer"}
    ask = tools["ask_user_question"].input_schema
    assert ask["properties"]["questions"]["maxItems"] == 4
    assert tools["confirm_action"].input_schema["required"] == ["action"]
    assert {"required": ["answers"]} in tools["ask_user_question"].output_schema["anyOf"]
    assert set(ask["properties"]) >= {"request_key", "wait"}
    assert tools["get_answer"].input_schema["properties"]["wait_s"]["maximum"] == 50


async def test_a_question_waits_for_the_answer_with_progress(mcp_live, account):
    progress = Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        waiting = call(session, progress=progress)
        await progress.next()
        [question] = await pending(user)
        assert question["questions"][0]["question"] == "Which pizza?"
        [conversation] = (await user.get("/conversations")).json()
        assert conversation["title"] == CLIENT
        await progress.next()  # at least two while it waits (MCP_PROGRESS_SECONDS=0.2 here)
        assert not waiting.done()
        answered = await user.post(
            f"/conversations/{question['conversationId']}/respond",
            json={"answers": {"Which pizza?": "Pepperoni"}},
        )
        assert answered.status_code == 200, answered.text
        result = await asyncio.wait_for(waiting, 10)
    assert not result.is_error
    assert result.structured_content == {"answers": {"Which pizza?": "Pepperoni"}}
    assert json.loads(result.content[0].text) == result.structured_content
    audit = result.meta["parley/question"]
    assert (audit["answeredVia"], audit["answeredBy"]) == ("api", account.username)
    assert audit["url"].endswith(f"#question-{question['toolCallId']}")
    assert progress.values == sorted(progress.values) and len(progress.values) >= 2
    assert progress.messages[0] == "Waiting for the user's answer in Parley."
    async with api(mcp_live.url, account) as user:
        assert await pending(user) == []
        detail = (await user.get(f"/conversations/{question['conversationId']}")).json()
    # No model ran after the answer: the turn ended there.
    assert detail["state"] == "idle"
    assert [m["role"] for m in detail["messages"]] == ["assistant", "user", "tool"]


async def test_several_questions_at_once(mcp_live, account):
    arguments = {
        "questions": [
            {"question": "Which base?", "options": [{"label": "Thin"}, {"label": "Thick"}]},
            {
                "question": "Which toppings?",
                "options": [{"label": "Olives"}, {"label": "Basil"}, {"label": "Chili"}],
                "multiSelect": True,
            },
            {"question": "Which drink?", "options": [{"label": "Water"}, {"label": "Soda"}]},
        ]
    }
    progress = Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        waiting = call(session, arguments, progress=progress)
        await progress.next()
        [question] = await pending(user)
        assert len(question["questions"]) == 3
        answers = {
            "Which base?": "Thin",
            "Which toppings?": ["Olives", "Chili"],
            "Which drink?": "Lemonade, please",
        }
        response = await user.post(
            f"/conversations/{question['conversationId']}/respond", json={"answers": answers}
        )
        assert response.status_code == 200, response.text
        result = await asyncio.wait_for(waiting, 10)
    assert result.structured_content == {"answers": answers}


async def test_confirm_action_rejected_is_an_error_saying_so(mcp_live, account):
    progress = Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        waiting = call(
            session,
            {"action": "Delete the staging database", "details": "All test data goes."},
            tool="confirm_action",
            progress=progress,
        )
        await progress.next()
        [question] = await pending(user)
        assert question["questions"][0]["options"] == [
            {"label": "Yes", "description": ""},
            {"label": "No", "description": ""},
        ]
        response = await user.post(f"/conversations/{question['conversationId']}/cancel")
        assert response.status_code == 200, response.text
        result = await asyncio.wait_for(waiting, 10)
    assert result.is_error
    assert "rejected" in result.content[0].text
    assert result.meta["parley/question"]["questionResolution"] == "rejected"


async def test_confirm_action_confirmed(mcp_live, account):
    progress = Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        waiting = call(session, {"action": "Deploy"}, tool="confirm_action", progress=progress)
        await progress.next()
        [question] = await pending(user)
        await user.post(
            f"/conversations/{question['conversationId']}/respond",
            json={"answers": {"Deploy": "Yes"}},
        )
        result = await asyncio.wait_for(waiting, 10)
    assert result.structured_content == {"answers": {"Deploy": "Yes"}}


async def test_the_deadline_expires(mcp_live):
    account = add_account(mcp_live, "hasty", expire_after=1)
    async with mcp_client(mcp_live.url, account.token) as session:
        result = await asyncio.wait_for(session.call_tool("ask_user_question", PIZZA), 15)
    assert result.is_error
    assert "expired" in result.content[0].text
    assert result.meta["parley/question"]["answeredVia"] == "expiry"


async def test_a_bad_call_is_an_error_result_and_asks_nothing(mcp_live, account):
    too_many = {"questions": [{**PIZZA["questions"][0], "question": f"Q{n}?"} for n in range(5)]}
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        for arguments in ({"questions": []}, too_many, {"questions": [{"question": "Why?"}]}):
            result = await session.call_tool("ask_user_question", arguments)
            assert result.is_error
            assert result.content[0].text.startswith("Invalid ask_user_question call")
        result = await session.call_tool("confirm_action", {"action": ""})
        assert result.is_error and "action" in result.content[0].text
        unknown = await session.call_tool("rm_rf", {})
        assert unknown.is_error and "Unknown tool" in unknown.content[0].text
        assert await pending(user) == []


async def test_a_second_call_while_one_waits_gets_its_own_conversation(mcp_live, account):
    first, second = Progress(), Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        one = call(session, progress=first)
        await first.next()
        other = {"action": "Merge the branch"}
        two = call(session, other, tool="confirm_action", progress=second)
        await second.next()
        questions = await pending(user)
        assert len({q["conversationId"] for q in questions}) == 2
        for question in questions:
            text = question["questions"][0]["question"]
            answer = "Funghi" if text == "Which pizza?" else "No"
            await user.post(
                f"/conversations/{question['conversationId']}/respond",
                json={"answers": {text: answer}},
            )
        results = await asyncio.wait_for(asyncio.gather(one, two), 10)
    assert [r.structured_content for r in results] == [
        {"answers": {"Which pizza?": "Funghi"}},
        {"answers": {"Merge the branch": "No"}},
    ]


async def test_the_client_reconnects_mid_wait_and_gets_the_answer(mcp_live, account):
    """The connection drops while the call waits; the SDK's client resumes the stream with
    Last-Event-ID and reads the answer given meanwhile."""
    proxy = Proxy(mcp_live.port)
    await proxy.start()
    progress = Progress()
    try:
        async with (
            mcp_client(proxy.url, account.token) as session,
            api(mcp_live.url, account) as user,
        ):
            waiting = call(session, progress=progress)
            await progress.next()
            proxy.drop_connections()
            [question] = await pending(user)
            response = await user.post(
                f"/conversations/{question['conversationId']}/respond",
                json={"answers": {"Which pizza?": "Funghi"}},
            )
            assert response.status_code == 200, response.text
            result = await asyncio.wait_for(waiting, 15)
    finally:
        await proxy.close()
    assert result.structured_content == {"answers": {"Which pizza?": "Funghi"}}


async def test_a_new_connection_to_the_session_resumes_with_last_event_id(mcp_live, account):
    """The client goes away mid-wait (no DELETE, no cancel); later a new connection to the same
    MCP session resumes the call's stream from the last event it had, and gets the answer."""
    tokens: list[str] = []

    async def keep(token: str) -> None:
        tokens.append(token)

    async with api(mcp_live.url, account) as user:
        proxy = Proxy(mcp_live.port)
        await proxy.start()
        async with mcp_client(proxy.url, account.token) as session:
            request = CallToolRequest(
                params=CallToolRequestParams(name="ask_user_question", arguments=PIZZA)
            )
            progress = Progress()
            waiting = asyncio.create_task(
                session.send_request(
                    request,
                    CallToolResult,
                    metadata=ClientMessageMetadata(on_resumption_token_update=keep),
                    progress_callback=progress,
                )
            )
            await progress.next()
            mcp_session = session_id(session)
            version = session.initialize_result.protocol_version
            await proxy.close()  # the network goes away for good: this client cannot resume
            with pytest.raises(Exception):  # noqa: B017 (whichever error the transport reports)
                await asyncio.wait_for(waiting, 15)
        [question] = await pending(user)
        await user.post(
            f"/conversations/{question['conversationId']}/respond",
            json={"answers": {"Which pizza?": "Pepperoni"}},
        )
    headers = {"mcp-session-id": mcp_session, "mcp-protocol-version": version}
    async with mcp_client_resumed(mcp_live.url, account.token, headers) as session:
        result = await asyncio.wait_for(
            session.send_request(
                request, CallToolResult, metadata=ClientMessageMetadata(resumption_token=tokens[-1])
            ),
            15,
        )
    assert result.structured_content == {"answers": {"Which pizza?": "Pepperoni"}}


async def test_another_users_token_cannot_see_or_answer(mcp_live, account):
    mallory = add_account(mcp_live, "mallory")
    progress = Progress()
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
        api(mcp_live.url, mallory) as other,
    ):
        waiting = call(session, progress=progress)
        await progress.next()
        [question] = await pending(user)
        assert await pending(other) == []
        conversation = question["conversationId"]
        assert (await other.get(f"/conversations/{conversation}")).status_code == 404
        answer = {"answers": {"Which pizza?": "Funghi"}}
        refused = await other.post(f"/conversations/{conversation}/respond", json=answer)
        assert refused.status_code == 404
        # Nor can the session be used with another user's token.
        async with httpx.AsyncClient(base_url=mcp_live.url) as client:
            response = await client.post(
                "/mcp/",
                json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                headers={
                    **mallory.auth,
                    "mcp-session-id": session_id(session),
                    "mcp-protocol-version": session.initialize_result.protocol_version,
                    "accept": "application/json, text/event-stream",
                },
            )
        assert response.status_code == 404
        assert not waiting.done()
        await user.post(f"/conversations/{conversation}/respond", json=answer)
        result = await asyncio.wait_for(waiting, 10)
    assert result.structured_content == answer


async def test_a_call_lost_to_a_restart_gets_the_kept_answer(tmp_path):
    """The server is killed (SIGKILL) while a call waits, and started again: the session is
    gone, the question is not.
    The client connects again and makes the same call: it returns the answer given meanwhile,
    without asking twice."""
    server = LiveServer(tmp_path, MCP_PROGRESS_SECONDS="0.2")
    server.set_up_database()
    server.start()
    try:
        account = add_account(server, "ada")
        progress = Progress()
        async with api(server.url, account) as user:
            async with mcp_client(server.url, account.token) as session:
                waiting = call(session, progress=progress)
                await progress.next()
                await asyncio.to_thread(server.stop, kill=True)
                # The call is cut off with the process: an error result saying to call again,
                # or the connection's end.
                try:
                    result = await asyncio.wait_for(waiting, 15)
                except Exception:
                    result = None
                assert result is None or result.is_error
            await asyncio.to_thread(server.start)
            [question] = await pending(user)
            await user.post(
                f"/conversations/{question['conversationId']}/respond",
                json={"answers": {"Which pizza?": "Funghi"}},
            )
            async with mcp_client(server.url, account.token) as session:
                result = await asyncio.wait_for(session.call_tool("ask_user_question", PIZZA), 10)
            assert result.structured_content == {"answers": {"Which pizza?": "Funghi"}}
            assert len((await user.get("/questions", params={"status": "answered"})).json()) == 1
            # Delivered now: the same call again asks again.
            async with mcp_client(server.url, account.token) as session:
                again = call(session, progress=progress)
                await progress.next()
                assert len(await pending(user)) == 1
                again.cancel()
    finally:
        server.stop()
