"""Users of /mcp/ cannot read, block or slow each other (SECURITY.md, "Parley as an MCP
server"): each session's stored events are its own, real SDK clients against real daphne."""

import asyncio
import secrets

import httpx
import pytest
from mcp.shared.message import ClientMessageMetadata
from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

from tests.mcp.conftest import Progress, add_account, api, mcp_client, pending, session_id

pytestmark = pytest.mark.live


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
