"""A running call's input rounds (MCP 2026-07-28), kept across restarts.

A server on 2026-07-28 that needs the person's input before a call can finish answers the call
with an input-required result: its input requests (elicitations) and an opaque
`requestState`. Each elicitation becomes a Question row that also stores the round's number,
the server's key for the request and that state (never shown); once every one is answered,
the call is sent again with the answers and the state echoed
(mcp_client.connections.ServerConnection.call_tool), round after round until it finishes.

So an answer given after Parley restarted, or in another process, still reaches the server:
the runner that takes the turn over finds the call already started, reads its last round back
(`resumed`), waits for the answers still missing, and sends it. Each round's retry goes out at
most once (a ToolRun row per round, as for the call itself): a round found already sent is an
interrupted call, like any call whose process died while it ran. A call whose turn ended
(stopped) cancels the round's open requests; one whose process stops keeps them.

Roots are answered with none; sampling is refused (Parley offers no model to servers)."""

import asyncio
import hashlib
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

from chat.engine import turns
from chat.errors import ConversationNotFound
from core import events
from core.text import drop_invisible
from mcp_client.connections import Call, Round
from mcp_client.models import ToolRun
from questions import asking, resolving, selectors
from questions.links import safe_link
from questions.payloads import MAX_SHOWN_CHARS, ElicitationRequest

db = database_sync_to_async

POLL_SECONDS = 2.0
# How long to wait before sending back a round that carries only the server's state.
STATE_ONLY_SECONDS = 0.25
NO_SAMPLING = "Parley does not offer sampling to MCP servers."


class Interrupted(Exception):
    """The round's answers may already have gone out once (its runner stopped meanwhile)."""


def request_for(call: Call, server: str, params: Any, **stored) -> ElicitationRequest | None:
    """An elicitation's request as Parley shows and stores it; None for a URL it never shows
    (not http(s), credentials, hidden characters). `stored`: the round's fields."""
    mode = getattr(params, "mode", "form") or "form"
    url = ""
    if mode == "url":
        link = safe_link(str(getattr(params, "url", "") or ""))
        if link is None:
            return None
        url = link.href
    return ElicitationRequest(
        server=server,
        call_id=call.call.id,
        tool=call.tool,
        message=drop_invisible(str(params.message or ""))[:MAX_SHOWN_CHARS],
        mode="url" if mode == "url" else "form",
        requested_schema=getattr(params, "requested_schema", None) or {},
        url=url,
        **stored,
    )


def row_key(call_id: str, number: int, input_key: str) -> str:
    """The row of one request of one round: the same each time it is looked for."""
    return "elicit_" + hashlib.sha256(f"{call_id}:{number}:{input_key}".encode()).hexdigest()[:24]


def round_key(call_id: str, number: int) -> str:
    """The ToolRun key of a round's retry."""
    return "round_" + hashlib.sha256(f"{call_id}:{number}".encode()).hexdigest()[:24]


async def answer(call: Call, server: str, result: types.InputRequiredResult, number: int) -> Round:
    """Ask the person each input `result` needs, stored with the server's state; wait for
    every answer; the round to send, recorded as sent. Raises Interrupted if it was."""
    requests = result.input_requests or {}
    if not requests:  # the server wants only its state back, a moment later
        await asyncio.sleep(STATE_ONLY_SECONDS)
        return Round(number, None, result.request_state)
    fixed: dict[str, Any] = {}
    asked: dict[str, str] = {}
    for input_key, request in requests.items():
        if isinstance(request, types.ListRootsRequest):
            fixed[input_key] = types.ListRootsResult(roots=[])
            continue
        if not isinstance(request, types.ElicitRequest):
            raise MCPError(INVALID_REQUEST, NO_SAMPLING)
        stored = request_for(
            call,
            server,
            request.params,
            round=number,
            input_key=input_key,
            request_state=result.request_state,
        )
        if stored is None:
            fixed[input_key] = types.ElicitResult(action="decline")
            continue
        key = row_key(call.call.id, number, input_key)
        await db(asking.ask_elicitation)(call.lease, call.call, stored, key=key)
        asked[input_key] = key
    responses = await _answers(call, asked)
    return await _sent(call, Round(number, {**fixed, **responses}, result.request_state))


async def resumed(call: Call) -> Round | None:
    """The call's last round, answered and recorded as sent, when the call started in a
    runner that stopped while the round waited; None when there is none to go on from (the
    call never asked, or that round may have gone out already)."""
    found = await db(selectors.input_round)(call.lease.conversation_id, call.call.id)
    if found is None:
        return None
    number, request_state, asked = found
    if await db(ToolRun.objects.filter(tool_call_id=round_key(call.call.id, number)).exists)():
        return None
    responses = await _answers(call, asked)
    try:
        return await _sent(call, Round(number, responses, request_state))
    except Interrupted:
        return None


async def _sent(call: Call, round: Round) -> Round:
    key = round_key(call.call.id, round.number)
    if not await db(ToolRun.start)(call.lease.conversation_id, key, call.tool):
        raise Interrupted
    return round


async def _answers(call: Call, asked: dict[str, str]) -> dict[str, types.ElicitResult]:
    """Each request's answer (input key -> the row's key), once all are in. A call whose turn
    ended first (stopped) leaves the ones still open cancelled."""
    conversation_id = call.lease.conversation_id
    answers: dict[str, types.ElicitResult] = {}
    finished = False
    try:
        async with events.subscribe(events.conversation_group(conversation_id)) as changes:
            while len(answers) < len(asked):
                for input_key, key in asked.items():
                    outcome = await db(selectors.elicitation_outcome)(conversation_id, key)
                    if outcome is not None and input_key not in answers:
                        action, content = outcome
                        answers[input_key] = types.ElicitResult(
                            action=action, content=content if action == "accept" else None
                        )
                if len(answers) < len(asked):
                    await changes.wait(POLL_SECONDS)
        finished = True
    finally:
        if not finished and not await asyncio.shield(db(_still_running)(call.lease)):
            for key in asked.values():
                await asyncio.shield(db(resolving.end_running_request)(conversation_id, key))
    return answers


def _still_running(lease: turns.Lease) -> bool:
    """Whether the call's turn still runs under this runner (it is only handing the turn
    back, as a process that stops does), rather than having ended or been taken over."""
    try:
        turns.current(lease)
    except (turns.LeaseLost, ConversationNotFound):
        return False
    return True
