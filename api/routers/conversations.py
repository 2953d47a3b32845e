"""GET and POST /conversations, GET /conversations/{id}: the user's conversations, a new one,
and one with its newest messages, what it waits for and its sub-agents."""

from ninja import Router, Status

from api import results
from api.schemas import (
    ERRORS,
    PAGE_SIZE,
    ConversationDetail,
    ConversationIn,
    ConversationOut,
    Message,
)
from api.selectors import message_page, superseded_tool_calls
from chat import services
from chat.selectors import conversation_for_user, conversations_for_user, subagents_of

router = Router()


@router.get("/conversations", response={200: list[ConversationOut], 401: Message}, by_alias=True)
def list_conversations(request):
    return [results.conversation_data(c) for c in conversations_for_user(user=request.user)]


@router.post("/conversations", response={201: ConversationOut, **ERRORS}, by_alias=True)
def create_conversation(request, body: ConversationIn):
    conversation = services.create_conversation(owner=request.user, title=body.title)
    return Status(201, results.conversation_data(conversation))


@router.get(
    "/conversations/{conversation_id}", response={200: ConversationDetail, **ERRORS}, by_alias=True
)
def get_conversation(request, conversation_id: int):
    """The conversation with its newest messages (`messagesBefore` pages back from them), its
    pending question and its sub-agents."""
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    page = results.page_data(message_page(conversation, limit=PAGE_SIZE))
    children = subagents_of(conversation)
    superseded_calls = superseded_tool_calls(conversation) if children else set()
    return {
        **results.conversation_data(conversation),
        **results.pending_data(conversation),
        "messages": page["messages"],
        "messagesBefore": page["before"],
        "children": [results.subagent_data(s, superseded_calls=superseded_calls) for s in children],
    }
