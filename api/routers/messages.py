"""GET and POST /conversations/{id}/messages: a page of the transcript, and a message sent
(which answers a pending question, as in the UI)."""

from asgiref.sync import sync_to_async
from ninja import Query, Router

from api import results
from api.replies import agent_reply
from api.schemas import ERRORS, MAX_PAGE_SIZE, PAGE_SIZE, AgentResult, MessagePage, PostMessage
from api.selectors import message_page
from chat import services
from chat.selectors import MAX_ID, conversation_for_user

router = Router()


@router.get(
    "/conversations/{conversation_id}/messages",
    response={200: MessagePage, **ERRORS},
    by_alias=True,
)
def list_messages(
    request,
    conversation_id: int,
    before: int | None = Query(
        None, ge=1, le=MAX_ID, description="A message id: the messages just older than it."
    ),
    after: int | None = Query(
        None, ge=1, le=MAX_ID, description="A message id: the messages just newer than it."
    ),
    limit: int = Query(
        PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE, description=f"How many messages: 1 to {MAX_PAGE_SIZE}."
    ),
):
    """A page of the conversation's messages, in transcript order: without `before` or
    `after`, the newest `limit`; with `before`, the `limit` just older than that message;
    with `after`, the `limit` just newer. Page on with the `before` and `after` it returns.
    A cursor that is not a message of this conversation, or both at once, is a 422."""
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    return results.page_data(message_page(conversation, limit=limit, before=before, after=after))


@router.post(
    "/conversations/{conversation_id}/messages",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def post_message(request, conversation_id: int, body: PostMessage):
    """Send a message. While a question is pending, the message answers it (as in the UI)."""
    message = await sync_to_async(services.post_user_message)(
        user=request.user, conversation_id=conversation_id, text=body.content
    )
    return await agent_reply(request, conversation_id, body.wait, since_order=message.order)
