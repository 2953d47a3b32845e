"""The MCP tools: `ask_user_question` and `confirm_action`, with the inputs, limits and
validation of Parley's own agent's question tools (questions.schemas), and what a call does:
ask the token's user, wait for the outcome, and return it."""

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

from api.tokens import token_still_valid
from core.errors import PastARate, RateLimited
from core.limits import StreamSlot, count_in_window
from mcp_server import results, services
from mcp_server.auth import TOKEN_ID_CLAIM
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
        }
    },
    "required": ["answers"],
}

TOOL_NAMES = (TOOL_ASK_USER_QUESTION, TOOL_CONFIRM_ACTION)

STOPPED = {SHUTTING_DOWN: results.SHUTTING_DOWN, CREDENTIAL_ENDED: results.CREDENTIAL_ENDED}


class TooManyToolCalls(PastARate):
    template = _("You made too many MCP tool calls in a minute. Try again in %(seconds)s seconds.")


def check_tool_call_rate(*, user_id: int) -> None:
    """Raise TooManyToolCalls past PARLEY_MCP_CALLS_PER_MINUTE: every call to Parley's MCP
    server counts, whatever it asks (an unknown tool, a bad call, a call made again)."""
    wait = count_in_window("mcp-calls", user_id, settings.PARLEY_MCP_CALLS_PER_MINUTE)
    if wait is not None:
        raise TooManyToolCalls(wait)


def tool_list() -> list[Tool]:
    return [
        Tool(
            name=name,
            title=TITLES[name],
            description=DESCRIPTIONS[name],
            input_schema=INPUTS[name].model_json_schema(),
            output_schema=ANSWERS_SCHEMA,
            # Asking changes nothing outside Parley; each call asks again.
            annotations=ToolAnnotations(
                title=TITLES[name], read_only_hint=True, open_world_hint=False
            ),
        )
        for name in TOOL_NAMES
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
        if params.name not in TOOL_NAMES:
            return results.unknown_tool(params.name)
        slot = StreamSlot(user_id)  # a waiting call is an open stream, as the API's are
    except RateLimited as limited:
        return results.error(str(limited.message))
    try:
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
    token_id = int(identity.access_token.claims[TOKEN_ID_CLAIM])
    user = await db(get_user_model().objects.get)(pk=user_id)
    try:
        call = await db(services.ask)(
            user=user, client=client_of(ctx), tool=name, arguments=params.arguments or {}
        )
    except ValueError as error:
        return results.error(results.INVALID.format(tool=name, error=error))
    except RateLimited as limited:
        return results.error(str(limited.message))
    question = await db(lambda: call.question)()

    async def progress(seconds: float) -> None:
        slot.touch()
        await ctx.session.report_progress(round(seconds, 1), None, WAITING)

    try:
        outcome = await wait_for_outcome(
            question_id=question.pk,
            conversation_id=question.conversation_id,
            user_id=user_id,
            still_valid=lambda: token_still_valid(token_id),
            progress=progress,
        )
    except StoppedWaiting as stopped:
        return results.error(results.INTERRUPTED.format(reason=STOPPED[stopped.reason]))
    result = results.outcome(outcome, question_url(question))
    await db(services.mark_delivered)(call_id=call.pk)
    return result
