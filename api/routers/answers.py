"""POST /conversations/{id}/respond and /cancel: answer the pending question by its texts, or
reject it (else stop the running turn). Approvals and elicitations are answered at their own
endpoints (api.routers.tool_requests)."""

from asgiref.sync import sync_to_async
from ninja import Router

from api import services
from api.auth import channel
from api.replies import agent_reply
from api.schemas import ERRORS, AgentResult, Cancel, Respond
from api.selectors import next_order
from questions import resolving

router = Router()


@router.post(
    "/conversations/{conversation_id}/respond", response={200: AgentResult, **ERRORS}, by_alias=True
)
async def respond(request, conversation_id: int, body: Respond):
    """Answer the pending question: one entry per question text. An approval or an
    elicitation is answered at its own endpoint (409 here)."""
    reply = await sync_to_async(services.answer_by_text)(
        user=request.user,
        conversation_id=conversation_id,
        answers=body.answers,
        tool_call_id=body.toolCallId,
        via=channel(request),
    )
    return await agent_reply(request, conversation_id, body.wait, since_order=reply.order)


@router.post(
    "/conversations/{conversation_id}/cancel", response={200: AgentResult, **ERRORS}, by_alias=True
)
async def cancel(request, conversation_id: int, body: Cancel | None = None):
    """Reject the pending question, or stop the running turn."""
    since = await sync_to_async(next_order)(user=request.user, conversation_id=conversation_id)
    await sync_to_async(resolving.cancel)(
        user=request.user, conversation_id=conversation_id, via=channel(request)
    )
    return await agent_reply(
        request, conversation_id, body.wait if body else 0, since_order=since, interrupted=True
    )
