"""What a call returns once its question is resolved: the answers, or an error result saying
why there are none. Words for the calling agent (a model), in English like the results Parley's
own agent reads."""

import json

from mcp_types import CallToolResult, TextContent

from core.text import clean_text
from questions import wire
from questions.answers import answer_values
from questions.models import Question, QuestionStatus

REJECTED = "The user rejected this question: they chose not to answer it."
EXPIRED = "The question expired: the user did not answer it in time."
CANCELLED = "The question was cancelled before the user answered it."
DELETED = "The question no longer exists: the user deleted its conversation."
INVALID = "Invalid {tool} call, not shown to the user: {error}. Fix it and ask again."
UNKNOWN_TOOL = (
    "Unknown tool {name!r}. Available tools: ask_user_question, confirm_action, get_answer."
)
BAD_OPTIONS = "request_key must be a string of at most 200 characters, and wait true or false"
BAD_WAIT = "wait_s must be a number of seconds from 0 to 50"
NO_SUCH_QUESTION = (
    "No question of yours has this questionId: give the questionId a call with wait=false returned."
)
# The most of an unknown tool's name said back.
ECHOED_NAME_CHARS = 64
FAILED = "Parley could not take this call. Try again later."
# A restart or a revoked token ends the wait, not the question: calling again with the same
# arguments returns its answer (mcp_server.services.ask).
INTERRUPTED = (
    "Parley stopped waiting for the answer ({reason}). The question stays open for the user: "
    "make the same call again to wait for its answer."
)
SHUTTING_DOWN = "the server is restarting"
CREDENTIAL_ENDED = "the token was revoked"

# Where the question is, for integrators: in the result's _meta.
META_KEY = "parley/question"


def answered(question: Question, url: str) -> CallToolResult:
    """The user's answers: {"answers": {question text: label, typed text, or a list of
    labels}} as structured content, and the same as JSON text."""
    structured = {"answers": answer_values(question.request, question.given_answers)}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured, ensure_ascii=False))],
        structured_content=structured,
        meta={META_KEY: wire.mcp_meta(question, url)},
    )


def pending(question: Question, url: str) -> CallToolResult:
    """Not answered yet: {"status": "pending", "questionId"}, for get_answer."""
    structured = {"status": "pending", "questionId": str(question.pk)}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured))],
        structured_content=structured,
        meta={META_KEY: wire.mcp_meta(question, url)},
    )


def outcome(question: Question | None, url: str = "") -> CallToolResult:
    """The result for a resolved question (None: it was deleted)."""
    if question is None:
        return error(DELETED)
    if question.status in (QuestionStatus.ANSWERED, QuestionStatus.AUTO_RESOLVED):
        return answered(question, url)
    text = {
        QuestionStatus.REJECTED: REJECTED,
        QuestionStatus.EXPIRED: EXPIRED,
    }.get(question.status, CANCELLED)
    return error(text, meta={META_KEY: wire.mcp_meta(question, url)})


def unknown_tool(name: str) -> CallToolResult:
    """The error for a tool Parley does not have, naming it cut short and cleaned."""
    shown = clean_text(name)
    if len(shown) > ECHOED_NAME_CHARS:
        shown = shown[: ECHOED_NAME_CHARS - 1] + "…"
    return error(UNKNOWN_TOOL.format(name=shown))


def error(text: str, *, meta: dict | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True, meta=meta)
