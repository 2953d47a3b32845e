"""Approvals and elicitations without an MCP server: a turn that made tool calls (its lease held,
tool_executing), then asks through questions.asking as mcp_client does."""

from chat.blocks import ToolCallBlock
from chat.engine import turns
from questions import asking
from questions.models import Question
from questions.payloads import ApprovalRequest, ElicitationRequest
from tests.factories import started_step

WRITE_NOTE = "mcp__notes__write_note"
WRITE_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
    "required": ["name", "text"],
}
SHOPPING = {"name": "shopping", "text": "Milk, eggs, bread"}
# The notes server's form (examples/notes_server.py, new_note_from_form).
FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Note name", "description": "A short name"},
        "text": {"type": "string", "title": "Text"},
        "pinned": {"type": "boolean", "title": "Pinned", "default": False},
        "priority": {
            "type": "integer",
            "title": "Priority",
            "minimum": 1,
            "maximum": 5,
            "default": 3,
        },
        "colour": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"]},
    },
    "required": ["name", "text", "colour"],
}


def tool_calls(conversation_id: int, *calls: ToolCallBlock) -> turns.Lease:
    """The model's step made `calls`: the turn runs its tools (tool_executing); the lease."""
    lease = started_step(conversation_id)
    turns.complete_step(lease, text="Saving your note.", tool_calls=list(calls))
    return lease


def write_call(call_id: str = "w1", **arguments) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=WRITE_NOTE, arguments=arguments or SHOPPING)


def approval_of(call: ToolCallBlock) -> ApprovalRequest:
    return ApprovalRequest.of(
        name=call.name,
        server="notes",
        tool=call.name.rsplit("__", 1)[-1],
        title="Write note",
        description="Create or replace a note.",
        arguments=call.arguments,
        input_schema=WRITE_SCHEMA,
    )


def ask_approvals(conversation_id: int, *calls: ToolCallBlock) -> list[ToolCallBlock]:
    """The step's `calls` (by default one write_note call, w1) each wait for approval: the
    turn is paused (awaiting_user)."""
    calls = calls or (write_call(),)
    lease = tool_calls(conversation_id, *calls)
    asking.ask_approvals(lease, [(call, approval_of(call)) for call in calls])
    return list(calls)


def ask_elicitation(
    conversation_id: int, *, key: str = "elicit_x", schema: dict | None = None
) -> Question:
    """A running call (f1, new_note_from_form) asks for the form: the turn keeps running
    (tool_executing) while the elicitation `key` is pending."""
    call = ToolCallBlock(id="f1", name="mcp__notes__new_note_from_form", arguments={})
    lease = tool_calls(conversation_id, call)
    request = ElicitationRequest(
        server="notes",
        call_id=call.id,
        tool="new_note_from_form",
        message="Details for the new note",
        requested_schema=FORM if schema is None else schema,
    )
    return asking.ask_elicitation(lease, call, request, key=key)
