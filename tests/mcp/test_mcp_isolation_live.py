"""Users of /mcp/ cannot read, block or slow each other (SECURITY.md, "Parley as an MCP
server"): each session's stored events are its own, real SDK clients against real daphne."""

import asyncio
import secrets

import httpx
import pytest
from mcp.shared.message import ClientMessageMetadata
from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

from tests.live_server import LiveServer, mcp_routes
from tests.mcp.conftest import Progress, add_account, api, mcp_client, pending, session_id

pytestmark = pytest.mark.live

SESSIONS_PER_USER = 3
IDLE_SECONDS = 3
CALLS_PER_MINUTE = 12
STREAMS = 2


@pytest.fixture(scope="module")
def mcp_live(tmp_path_factory):
    """A server with small limits: sessions per user, their idle timeout, calls per minute
    and waiting calls (open streams) per user."""
    server = LiveServer(
        tmp_path_factory.mktemp("mcp-isolation"),
        MCP_PROGRESS_SECONDS="0.2",
        MCP_SESSIONS_PER_USER=str(SESSIONS_PER_USER),
        MCP_SESSION_IDLE_SECONDS=str(IDLE_SECONDS),
        PARLEY_MCP_CALLS_PER_MINUTE=str(CALLS_PER_MINUTE),
        PARLEY_MAX_STREAMS=str(STREAMS),
    )
    server.set_up_database()
    server.start()
    yield server
    server.stop()


def question(text: str, *labels: str) -> dict:
    return {
        "questions": [
            {"question": text, "header": "Q", "options": [{"label": label} for label in labels]}
        ]
    }


class Call:
    """A tool call that waits for the user, with the event ids (resumption tokens) its stream
    carried and its progress notifications."""

    def __init__(self, session, arguments: dict) -> None:
        self.event_ids: list[str] = []
        self.progress = Progress()
        request = CallToolRequest(
            params=CallToolRequestParams(name="ask_user_question", arguments=arguments)
        )
        self.task = asyncio.create_task(
            session.send_request(
                request,
                CallToolResult,
                metadata=ClientMessageMetadata(on_resumption_token_update=self._keep),
                progress_callback=self.progress,
            )
        )

    async def _keep(self, event_id: str) -> None:
        self.event_ids.append(event_id)


async def resume(base_url: str, token: str, session, last_event_id: str) -> str:
    """What a GET that resumes `session`'s stream after `last_event_id` replays (the call's own
    connection is still open, so the replay ends once sent)."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "text/event-stream",
        "mcp-session-id": session_id(session),
        "mcp-protocol-version": session.initialize_result.protocol_version,
        "Last-Event-ID": last_event_id,
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        response = await client.get("/mcp/", headers=headers)
    return response.text


async def answer(user, text: str, label: str) -> str:
    [asked] = [q for q in await pending(user) if q["questions"][0]["question"] == text]
    response = await user.post(
        f"/conversations/{asked['conversationId']}/respond", json={"answers": {text: label}}
    )
    assert response.status_code == 200, response.text
    return str(asked["conversationId"])


async def test_a_resumed_stream_replays_its_own_sessions_events_and_no_one_elses(mcp_live, account):
    """Alice's and Bob's first calls are both request 2 of their sessions. Bob resumes his
    stream from its first event after Alice's call was answered: he gets his own progress and
    not one byte of Alice's; from Alice's event id, or an unknown one, he gets nothing."""
    alice = account
    bob = add_account(mcp_live, f"bob-{secrets.token_hex(4)}")
    async with (
        mcp_client(mcp_live.url, alice.token) as alice_mcp,
        mcp_client(mcp_live.url, bob.token) as bob_mcp,
        api(mcp_live.url, alice) as alice_api,
        api(mcp_live.url, bob) as bob_api,
    ):
        bobs = Call(bob_mcp, question("Which pizza?", "Funghi", "Pepperoni"))
        await bobs.progress.next()
        alices = Call(alice_mcp, question("Which colour for the launch?", "Teal", "Ochre"))
        await alices.progress.next()
        alice_conversation = await answer(alice_api, "Which colour for the launch?", "Teal")
        assert (await asyncio.wait_for(alices.task, 10)).structured_content == {
            "answers": {"Which colour for the launch?": "Teal"}
        }
        await bobs.progress.next()

        replayed = await resume(mcp_live.url, bob.token, bob_mcp, bobs.event_ids[0])
        assert "notifications/progress" in replayed  # his own events do come back
        for alices_bytes in (
            "Teal",
            "Which colour",
            f"/{alice_conversation}#question",
            alice.username,
        ):
            assert alices_bytes not in replayed
        assert "event:" not in await resume(mcp_live.url, bob.token, bob_mcp, alices.event_ids[0])
        unknown = bobs.event_ids[0].rsplit("-", 1)[0] + "-999999"
        assert "event:" not in await resume(mcp_live.url, bob.token, bob_mcp, unknown)

        await answer(bob_api, "Which pizza?", "Funghi")
        assert (await asyncio.wait_for(bobs.task, 10)).structured_content == {
            "answers": {"Which pizza?": "Funghi"}
        }


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
JSON_AND_SSE = {"Accept": "application/json, text/event-stream"}


async def open_session(client: httpx.AsyncClient, token: str) -> httpx.Response:
    return await client.post(
        "/mcp/", json=INITIALIZE, headers={"Authorization": f"Bearer {token}", **JSON_AND_SSE}
    )


async def test_one_user_holds_a_few_sessions_and_everyone_else_still_opens_theirs(
    mcp_live, account
):
    """Past MCP_SESSIONS_PER_USER a user's next session is refused with 429 and a reason,
    while another user opens theirs; closing one, or letting it idle out, frees its place."""
    mallory = add_account(mcp_live, f"mallory-{secrets.token_hex(4)}")
    async with httpx.AsyncClient(base_url=mcp_live.url, timeout=10) as client:
        held = [await open_session(client, mallory.token) for _ in range(SESSIONS_PER_USER)]
        assert [r.status_code for r in held] == [200] * SESSIONS_PER_USER
        refused = await open_session(client, mallory.token)
        assert refused.status_code == 429
        assert "Too many open MCP sessions: a user may have 3" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"] == str(IDLE_SECONDS)
        assert (await open_session(client, account.token)).status_code == 200

        closed = await client.delete(
            "/mcp/",
            headers={
                "Authorization": f"Bearer {mallory.token}",
                "mcp-session-id": held[0].headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert closed.status_code == 200
        assert (await open_session(client, mallory.token)).status_code == 200
        assert (await open_session(client, mallory.token)).status_code == 429

        # Idle past MCP_SESSION_IDLE_SECONDS, her sessions end and she may open more.
        deadline = asyncio.get_running_loop().time() + IDLE_SECONDS + 5
        while (reopened := await open_session(client, mallory.token)).status_code == 429:
            assert asyncio.get_running_loop().time() < deadline, "idle sessions never ended"
            await asyncio.sleep(0.25)  # polling the server for the idle timeout to pass
        assert reopened.status_code == 200


async def test_every_call_counts_and_an_unknown_tools_name_is_not_echoed_whole(mcp_live, account):
    """A call to a tool that does not exist says so, naming it cut short, and counts against
    PARLEY_MCP_CALLS_PER_MINUTE like every call; past it, even a good call is refused."""
    long_name = "x" * 200_000
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        # The limit counts in minutes of the clock: calls that straddle one may get twice it.
        made = 0
        while made <= 2 * CALLS_PER_MINUTE:
            made += 1
            result = await session.call_tool(long_name, {})
            [text] = result.content
            assert result.is_error and len(text.text) < 200
            if not text.text.startswith("Unknown tool 'xxx"):
                break
        assert CALLS_PER_MINUTE < made <= 2 * CALLS_PER_MINUTE + 1
        assert "too many MCP tool calls in a minute" in text.text
        refused = await session.call_tool("ask_user_question", question("Lunch?", "Yes", "No"))
        assert refused.is_error
        assert "too many MCP tool calls in a minute" in refused.content[0].text
        assert await pending(user) == []


async def test_a_call_past_the_stream_cap_is_refused_before_it_asks(mcp_live, account):
    """A user may have PARLEY_MAX_STREAMS calls waiting; one more is refused and asks nothing."""
    async with (
        mcp_client(mcp_live.url, account.token) as session,
        api(mcp_live.url, account) as user,
    ):
        waiting = [Call(session, question(f"Question {n}?", "Yes", "No")) for n in range(STREAMS)]
        for call in waiting:
            await call.progress.next()
        refused = await session.call_tool("ask_user_question", question("One more?", "Yes", "No"))
        assert refused.is_error and "streams" in refused.content[0].text
        asked = [q["questions"][0]["question"] for q in await pending(user)]
        assert sorted(asked) == ["Question 0?", "Question 1?"]
        for n, call in enumerate(waiting):
            await answer(user, f"Question {n}?", "Yes")
            await asyncio.wait_for(call.task, 10)


async def test_a_session_id_shows_nothing_of_the_process_that_holds_it(mcp_live, account):
    """It starts with the process's opaque route (for nginx), not its address."""
    async with httpx.AsyncClient(base_url=mcp_live.url, timeout=10) as client:
        opened = await open_session(client, account.token)
    route, _slash, rest = opened.headers["mcp-session-id"].partition("/")
    assert route == mcp_routes([f"127.0.0.1:{mcp_live.port}"])[0]
    assert rest and "127.0.0.1" not in opened.headers["mcp-session-id"]
