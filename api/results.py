"""What the API returns: messages, pending questions (and approvals and elicitations), agent
results and members, as plain dicts."""

from chat.blocks import TextBlock, ToolCallBlock, parse_blocks
from chat.models import OWNER, RUNNING_STATES, AgentState, Conversation, Message, Role
from chat.paging import TranscriptPage
from chat.selectors import Subagent, members_of
from questions import wire
from questions.models import Question, QuestionKind
from questions.selectors import pending_questions

STATUS = {
    AgentState.AWAITING_USER: "needs_input",
    AgentState.ERROR: "error",
    AgentState.IDLE: "complete",
}


def message_data(message: Message) -> dict:
    blocks = parse_blocks(message.blocks)
    return {
        "id": message.pk,
        "role": message.role,
        "order": message.order,
        "text": "\n".join(b.text for b in blocks if isinstance(b, TextBlock)),
        "blocks": message.blocks,
        "isDraft": message.is_draft,
        # Replaced by Regenerate or an edit: kept for the record, not shown, not sent to the model.
        "superseded": message.superseded,
        "version": message.version,
        "createdAt": message.created_at.isoformat(),
    }


def page_data(page: TranscriptPage) -> dict:
    """A page of messages with the cursors (message ids) that page on from its ends."""
    return {
        "messages": [message_data(m) for m in page.messages],
        "before": page.first.pk if page.has_older else None,
        "after": page.last.pk if page.has_newer else None,
    }


def conversation_data(conversation: Conversation) -> dict:
    return {
        "id": conversation.pk,
        "title": str(conversation),
        "state": conversation.agent_state,
        "seq": conversation.seq,
        "createdAt": conversation.created_at.isoformat(),
        "updatedAt": conversation.updated_at.isoformat(),
        # The caller's role in it, when it was read for them (chat.selectors).
        "role": getattr(conversation, "viewer_role", None) or "owner",
    }


def subagent_data(subagent: Subagent, *, superseded_calls: set[str]) -> dict:
    """A sub-agent as its parent lists it; `superseded_calls`: the parent's tool calls in
    superseded messages (tool_call_ids)."""
    call_id = subagent.conversation.parent_tool_call_id
    return {
        **conversation_data(subagent.conversation),
        "toolCallId": call_id,
        "number": subagent.number,
        "status": subagent.status,
        "superseded": call_id in superseded_calls,
        "messages": [message_data(m) for m in subagent.messages],
    }


def tool_call_ids(messages: list[Message]) -> set[str]:
    """The ids of the tool calls in `messages`."""
    return {
        block.id
        for message in messages
        for block in parse_blocks(message.blocks)
        if isinstance(block, ToolCallBlock)
    }


def question_data(question: Question | None) -> dict | None:
    """A question, an approval or an elicitation as the API returns it (questions.wire)."""
    return None if question is None else wire.api_question(question)


def agent_result(
    conversation: Conversation, *, since_order: int = 0, interrupted: bool = False
) -> dict:
    """The state of the agent's turn, and the messages written since `since_order`."""
    messages = list(conversation.messages.filter(order__gte=since_order).order_by("order"))
    if conversation.agent_state in RUNNING_STATES:
        status = "running"
    elif interrupted and conversation.agent_state == AgentState.IDLE:
        status = "interrupted"
    else:
        status = STATUS[AgentState(conversation.agent_state)]
    replies = [
        m
        for m in messages
        if m.role == Role.ASSISTANT and not m.superseded and message_data(m)["text"]
    ]
    return {
        "status": status,
        "conversationId": conversation.pk,
        "response": message_data(replies[-1])["text"] if replies else "",
        **pending_data(conversation),
        "messages": [message_data(m) for m in messages],
    }


def pending_data(conversation: Conversation) -> dict:
    """`pendingQuestion`: what the paused turn waits for (the first, when several approvals
    wait), or None, as before approvals and elicitations; `pendingQuestions`: everything that
    waits for an answer now (questions.selectors.pending_questions), an elicitation while its
    tool runs included."""
    pending = pending_questions(conversation)
    first = None
    if conversation.agent_state == AgentState.AWAITING_USER:
        first = next((q for q in pending if q.kind != QuestionKind.ELICITATION), None)
    return {
        "pendingQuestion": question_data(first),
        "pendingQuestions": [question_data(q) for q in pending],
    }


def members_data(conversation: Conversation) -> list[dict]:
    """The conversation's owner, then the people it is shared with, first added first."""
    owner = {
        "username": conversation.owner.get_username(),
        "role": OWNER,
        "addedAt": conversation.created_at.isoformat(),
    }
    return [owner] + [
        {"username": m.user.get_username(), "role": m.role, "addedAt": m.added_at.isoformat()}
        for m in members_of(conversation)
    ]
