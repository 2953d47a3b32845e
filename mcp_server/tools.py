"""The MCP tools: `ask_user_question` and `confirm_action`, with the inputs, limits and
validation of Parley's own agent's question tools (questions.schemas), and what a call does:
ask the token's user, wait for the outcome, and return it."""

import asyncio
import logging

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError
from django.utils.translation import gettext_lazy as _
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_REQUEST,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolAnnotations,
)

from core.errors import PastARate, RateLimited
from core.limits import StreamSlot, count_in_window
from core.text import clean_text
from mcp_server import results, services
from mcp_server.auth import credential_still_valid
from mcp_server.waiting import (
    CREDENTIAL_ENDED,
    SHUTTING_DOWN,
    StoppedWaiting,
    wait_for_outcome,
)
from questions.schemas import TOOL_ASK_USER_QUESTION, TOOL_CONFIRM_ACTION
from questions.selectors import question_url
from questions.tools import INPUTS

db = database_sync_to_async
logger = logging.getLogger("parley.mcp")

# What the client's progress notifications say while a call waits.
WAITING = "Waiting for the user's answer in Parley."

WAITS = (
    "The call waits until the user answers in Parley (in the browser, the API or the terminal "
    "client; the question also reaches their inbox, notifications and webhooks), sending "
    "progress notifications meanwhile when you give a progress token; it may take minutes or "
    "hours. If the call is lost (a restart, a dropped connection), make the same call again: "
    "it returns the answer to the first instead of asking twice. If the user rejects the "
    'question, the result is an error saying "rejected"; if its deadline passes, an error '
    'saying "expired".'
)

DESCRIPTIONS = {
    TOOL_ASK_USER_QUESTION: (
        "Ask the user 1-4 related questions at once, each with 2-4 options to choose from "
        "(multiSelect: true to allow several); the user may also type an answer of their own. "
        'The result\'s structuredContent is {"answers": {"<question text>": "<chosen label or '
        'typed text>", or a list of labels with multiSelect}}, and the same as JSON text. '
        "Ask only when you cannot reasonably go on without the user. " + WAITS
    ),
    TOOL_CONFIRM_ACTION: (
        "Ask the user to confirm an action before you take it: deleting files or data, "
        "breaking changes, anything hard to undo or affecting production. Describe the action "
        "and its consequences in details. The result's structuredContent is "
        '{"answers": {"<action>": "Yes"}} or "No" (or the user\'s own words, which you should '
        "read before acting); take the action only on Yes. " + WAITS
    ),
}

TITLES = {
    TOOL_ASK_USER_QUESTION: "Ask the user",
    TOOL_CONFIRM_ACTION: "Ask the user to confirm",
}

ANSWERS_SCHEMA = {
    "type": "object",
    "properties": {
        "answers": {
            "type": "object",
            "description": "Question text -> the chosen label, the typed text, or a list of "
            "labels (multiSelect).",
            "additionalProperties": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
            },
        },
        "status": {
            "const": "pending",
            "description": "Not answered yet (wait=false, or get_answer's wait ran out).",
        },
        "questionId": {"type": "string", "description": "The question, for get_answer."},
    },
    "anyOf": [{"required": ["answers"]}, {"required": ["status", "questionId"]}],
}

# What the MCP tools take besides the question tools' own inputs (questions.tools.INPUTS).
ASKING_OPTIONS = {
    "request_key": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "description": "Your own key for this question: calling again with the same key "
        "returns the same question (and, once answered, its answer), never a second one. Use "
        "it to re-issue a call safely after a lost connection.",
    },
    "wait": {
        "type": "boolean",
        "default": True,
        "description": 'false: return at once with {"status": "pending", "questionId"} '
        "(or the answer, if there is one already) and get the answer later with get_answer.",
    },
}
GET_ANSWER = "get_answer"
MAX_ANSWER_WAIT = 50
GET_ANSWER_INPUT = {
    "type": "object",
    "properties": {
        "questionId": {
            "type": "string",
            "description": "The questionId a call with wait=false (or a pending result) gave.",
        },
        "wait_s": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_ANSWER_WAIT,
            "default": 0,
            "description": f"Seconds to wait for the answer (at most {MAX_ANSWER_WAIT}).",
        },
    },
    "required": ["questionId"],
    "additionalProperties": False,
}

TOOL_NAMES = (TOOL_ASK_USER_QUESTION, TOOL_CONFIRM_ACTION)
ALL_TOOLS = (*TOOL_NAMES, GET_ANSWER)

STOPPED = {SHUTTING_DOWN: results.SHUTTING_DOWN, CREDENTIAL_ENDED: results.CREDENTIAL_ENDED}


class TooManyToolCalls(PastARate):
    template = _("You made too many MCP tool calls in a minute. Try again in %(seconds)s seconds.")


def check_tool_call_rate(*, user_id: int) -> None:
    """Raise TooManyToolCalls past PARLEY_MCP_CALLS_PER_MINUTE: every call to Parley's MCP
    server counts, whatever it asks (an unknown tool, a bad call, a call made again)."""
    wait = count_in_window("mcp-calls", user_id, settings.PARLEY_MCP_CALLS_PER_MINUTE)
    if wait is not None:
        raise TooManyToolCalls(wait)


def input_schema(name: str) -> dict:
    """The question tool's own input, and the MCP server's options (request_key, wait)."""
    schema = INPUTS[name].model_json_schema()
    schema["properties"] = {**schema.get("properties", {}), **ASKING_OPTIONS}
    return schema


def tool_list() -> list[Tool]:
    asking = [
        Tool(
            name=name,
            title=TITLES[name],
            description=DESCRIPTIONS[name],
            input_schema=input_schema(name),
            output_schema=ANSWERS_SCHEMA,
            # Asking changes nothing outside Parley; each call asks again.
            annotations=ToolAnnotations(
                title=TITLES[name], read_only_hint=True, open_world_hint=False
            ),
        )
        for name in TOOL_NAMES
    ]
    return [
        *asking,
        Tool(
            name=GET_ANSWER,
            title="Get the user's answer",
            description='The answer to a question asked with wait=false, or "pending": '
            "waits up to wait_s seconds for it (at most 50).",
            input_schema=GET_ANSWER_INPUT,
            output_schema=ANSWERS_SCHEMA,
            annotations=ToolAnnotations(
                title="Get the user's answer", read_only_hint=True, open_world_hint=False
            ),
        ),
    ]


async def list_tools(
    ctx: ServerRequestContext, params: PaginatedRequestParams | None
) -> ListToolsResult:
    return ListToolsResult(tools=tool_list())


def caller(ctx: ServerRequestContext) -> AuthenticatedUser:
    """Who calls: the token that authenticated the HTTP request (mcp_server.auth)."""
    user = getattr(ctx.request, "user", None)
    if not isinstance(user, AuthenticatedUser):  # the endpoint lets nobody else in
        raise MCPError(code=INVALID_REQUEST, message="Authentication required")
    return user


def client_of(ctx: ServerRequestContext) -> services.Client:
    """The client as it named itself (clientInfo) and its MCP session, if any."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    headers = getattr(ctx.request, "headers", None) or {}
    return services.Client(
        name=info.name if info is not None else "",
        version=info.version if info is not None else "",
        session_id=headers.get("mcp-session-id", ""),
    )


async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
    """Ask the token's user, wait for the outcome and return it. A bad call is an error
    result saying what was wrong, as Parley's own agent reads it, so the model can fix it.

    Every call counts against the user's PARLEY_MCP_CALLS_PER_MINUTE first, and a waiting
    call takes one of their PARLEY_MAX_STREAMS before anything is asked: a refused call asks
    nothing."""
    identity = caller(ctx)
    user_id = int(identity.access_token.subject)
    try:
        await db(check_tool_call_rate)(user_id=user_id)
        if params.name not in ALL_TOOLS:
            return results.unknown_tool(params.name)
        slot = StreamSlot(user_id)  # a waiting call is an open stream, as the API's are
    except RateLimited as limited:
        return results.error(str(limited.message))
    try:
        if params.name == GET_ANSWER:
            return await _get_answer(ctx, identity, params, slot)
        return await _ask_and_wait(ctx, identity, params, slot)
    except DatabaseError:
        logger.exception("MCP call %s of user %s failed", params.name, user_id)
        return results.error(results.FAILED)
    finally:
        slot.release()


async def _ask_and_wait(
    ctx: ServerRequestContext,
    identity: AuthenticatedUser,
    params: CallToolRequestParams,
    slot: StreamSlot,
) -> CallToolResult:
    name = params.name
    user_id = int(identity.access_token.subject)
    user = await db(get_user_model().objects.get)(pk=user_id)
    arguments = dict(params.arguments or {})
    request_key = arguments.pop("request_key", "")
    wait = arguments.pop("wait", True)
    if not isinstance(request_key, str) or len(request_key) > 200 or not isinstance(wait, bool):
        return results.error(results.INVALID.format(tool=name, error=results.BAD_OPTIONS))
    try:
        call = await db(services.ask)(
            user=user,
            client=client_of(ctx),
            tool=name,
            arguments=arguments,
            request_key=clean_text(request_key),
        )
    except ValueError as error:
        return results.error(results.INVALID.format(tool=name, error=error))
    except RateLimited as limited:
        return results.error(str(limited.message))
    question = await db(lambda: call.question)()
    return await _outcome_of(ctx, identity, call, question, slot, wait=None if wait else 0)


async def _get_answer(
    ctx: ServerRequestContext,
    identity: AuthenticatedUser,
    params: CallToolRequestParams,
    slot: StreamSlot,
) -> CallToolResult:
    """The answer to one of the user's questions asked through MCP, or pending after up to
    `wait_s` seconds (at most MAX_ANSWER_WAIT)."""
    arguments = params.arguments or {}
    seconds = arguments.get("wait_s", 0)
    if (
        not isinstance(seconds, int | float)
        or isinstance(seconds, bool)
        or not 0 <= seconds <= MAX_ANSWER_WAIT
    ):
        return results.error(results.INVALID.format(tool=GET_ANSWER, error=results.BAD_WAIT))
    user = await db(get_user_model().objects.get)(pk=int(identity.access_token.subject))
    call = await db(services.call_for_user)(user=user, question_id=arguments.get("questionId"))
    if call is None:
        return results.error(results.NO_SUCH_QUESTION)
    return await _outcome_of(ctx, identity, call, call.question, slot, wait=float(seconds))


async def _outcome_of(ctx, identity, call, question, slot: StreamSlot, *, wait: float | None):
    """Wait for the question's outcome (`wait` seconds at most; None: as long as it takes)
    and return it, or pending when the wait runs out first."""
    user_id = int(identity.access_token.subject)
    claims = identity.access_token.claims or {}

    async def progress(seconds: float) -> None:
        slot.touch()
        await ctx.session.report_progress(round(seconds, 1), None, WAITING)

    waiting = wait_for_outcome(
        question_id=question.pk,
        conversation_id=question.conversation_id,
        user_id=user_id,
        still_valid=lambda: credential_still_valid(user_id=user_id, claims=claims),
        progress=progress,
    )
    try:
        if wait is None:
            outcome = await waiting
        else:
            outcome = await asyncio.wait_for(waiting, timeout=wait)
    except TimeoutError:
        return results.pending(question, question_url(question))
    except StoppedWaiting as stopped:
        return results.error(results.INTERRUPTED.format(reason=STOPPED[stopped.reason]))
    result = results.outcome(outcome, question_url(question))
    await db(services.mark_delivered)(call_id=call.pk)
    return result
