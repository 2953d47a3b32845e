"""POST /conversations/{id}/approvals/{call}, /approvals (a step's together) and
/elicitations/{call}: decide whether a tool from an MCP server may run (questions.approvals),
and answer what a running tool asks (questions.resolving)."""

from asgiref.sync import sync_to_async
from ninja import Router

from api.auth import channel
from api.replies import agent_reply
from api.schemas import ERRORS, AgentResult, Decide, DecideAll, Elicit
from api.selectors import next_order
from questions import approvals, resolving
from questions.payloads import storable

router = Router()


@router.post(
    "/conversations/{conversation_id}/approvals/{tool_call_id}",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def decide(request, conversation_id: int, tool_call_id: str, body: Decide):
    """Decide a pending approval of a tool call (`toolCallId` of the approval). The paused
    step goes on once every approval it waits for is decided."""
    since = await sync_to_async(next_order)(user=request.user, conversation_id=conversation_id)
    await sync_to_async(approvals.decide)(
        user=request.user,
        conversation_id=conversation_id,
        tool_call_id=tool_call_id,
        decision=body.decision,
        arguments=storable(body.arguments),
        feedback=body.feedback or "",
        via=channel(request),
        widen=body.widen,
    )
    return await agent_reply(request, conversation_id, body.wait, since_order=since)


@router.post(
    "/conversations/{conversation_id}/approvals",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def decide_all(request, conversation_id: int, body: DecideAll):
    """Allow or deny a step's waiting approvals together, each bound to the arguments you saw
    (`argumentsDigest`): all of them, or none if any changed or was decided meanwhile."""
    since = await sync_to_async(next_order)(user=request.user, conversation_id=conversation_id)
    await sync_to_async(approvals.decide_all)(
        user=request.user,
        conversation_id=conversation_id,
        calls=body.calls,
        decision=body.decision,
        via=channel(request),
    )
    return await agent_reply(request, conversation_id, body.wait, since_order=since)


@router.post(
    "/conversations/{conversation_id}/elicitations/{tool_call_id}",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def elicitation(request, conversation_id: int, tool_call_id: str, body: Elicit):
    """Answer a running tool's elicitation (`toolCallId` of the elicitation): accept with the
    form's `content`, decline or cancel. The tool goes on with the answer."""
    since = await sync_to_async(next_order)(user=request.user, conversation_id=conversation_id)
    await sync_to_async(resolving.answer_elicitation)(
        user=request.user,
        conversation_id=conversation_id,
        tool_call_id=tool_call_id,
        action=body.action,
        values=storable(body.content or {}),
        via=channel(request),
    )
    return await agent_reply(request, conversation_id, body.wait, since_order=since)
