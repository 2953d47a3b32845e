"""A question's, an approval's and an elicitation's JSON, as Parley sends it everywhere: the
JSON API and its event stream (api.results), webhooks (webhooks.services) and MCP results
(mcp_server.results). The one place these shapes are written (spec §6); each channel takes
the parts it sends. Keys are camelCase, times ISO 8601. Reads `answered_by` and `assigned_to`
(select_related them for many)."""

from questions.models import Question
from questions.payloads import APPROVAL_TYPE, ELICITATION_TYPE, ApprovalPayload
from questions.selectors import question_url

# Who resolved a question, how, when and through which channel; its deadline and assignee.
AUDIT_FIELDS = {
    "question_resolution",
    "expires_at",
    "answered_by",
    "answered_at",
    "answered_via",
    "assigned_to",
}
# What an approval and an elicitation ask.
APPROVAL_FIELDS = {
    "name",
    "server",
    "tool",
    "agent",
    "title",
    "description",
    "arguments",
    "input_schema",
    "subagent_number",
    "subagent",
}
ELICITATION_FIELDS = {"server", "tool", "call_id", "message", "mode", "url", "fields"}


def reference(question: Question) -> dict:
    """Where the question is: its conversation and its tool call."""
    return {"conversationId": question.conversation_id, "toolCallId": question.tool_call_id}


def audit(question: Question) -> dict:
    """questionResolution, expiresAt, answeredBy, answeredAt, answeredVia, assignedTo."""
    return question.payload.model_dump(mode="json", include=AUDIT_FIELDS)


def tool_request(question: Question) -> dict:
    """An approval or an elicitation: `tool` (`tool_approval` or `elicitation`); `approval`
    (what the call is, its arguments and their digest) with `decision`, `editedArguments`,
    `feedback`, `stoppedBy` (the step's call whose deny denied it) and `rule` (the rule that
    decided it, or that Always allow kept),
    or `elicitation` (the server's message and form) with `action` and `content`; then the
    audit."""
    payload = question.payload
    if isinstance(payload, ApprovalPayload):
        return {
            "tool": APPROVAL_TYPE,
            "approval": {
                **payload.model_dump(mode="json", include=APPROVAL_FIELDS),
                "argumentsDigest": payload.arguments_digest,
            },
            "decision": payload.decision,
            "stoppedBy": payload.stopped_by or None,
            "editedArguments": payload.edited_arguments,
            "feedback": payload.feedback,
            "rule": payload.rule.model_dump(mode="json") if payload.rule else None,
            **audit(question),
        }
    return {
        "tool": ELICITATION_TYPE,
        "elicitation": payload.model_dump(mode="json", include=ELICITATION_FIELDS),
        "action": payload.action,
        "content": payload.content,
        **audit(question),
    }


def api_question(question: Question) -> dict:
    """A question, an approval or an elicitation as the API returns it: pending, or with its
    resolution and audit. A question of one part also has the legacy `question` (its text) and
    `options` (its labels)."""
    if question.is_tool_request:
        return {**reference(question), **tool_request(question)}
    payload = question.question_payload
    data = {
        **reference(question),
        "tool": payload.tool_name,
        "questions": [part.model_dump(mode="json") for part in payload.questions],
        **audit(question),
    }
    if len(payload.questions) == 1:
        data["question"] = payload.first.text
        data["options"] = payload.first.labels
    return data


def webhook_data(question: Question) -> dict:
    """A question event's `data` (spec 6.1): what was asked (with how an approval or an
    elicitation was decided, and its audit) and an absolute link to it."""
    if question.is_tool_request:
        data = {**reference(question), **tool_request(question)}
    else:
        data = {**reference(question), "tool": question.kind, "questions": question.questions}
    data["url"] = question_url(question)
    return data


def mcp_meta(question: Question, url: str) -> dict:
    """What an MCP result says of its question (its `_meta`): where it is, and the audit."""
    return {**reference(question), "url": url, **audit(question)}
