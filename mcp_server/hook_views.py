"""The agent CLIs' hooks: `POST /hooks/claude-code/permission-request`,
`/hooks/claude-code/notification` and `/hooks/codex/permission-request`.

Each authenticates a personal API token (`Authorization: Bearer …`; 401 without one), refuses
a body over 256 KiB (413) and an input it cannot read (400, creating nothing), and counts
against the user's limits (429). A permission request then waits, without a thread, for the
person's decision for at most AGENT_HOOK_WAIT seconds (mcp_server.waiting), and answers with
the CLI's documented output: the decision, or none (the CLI asks in its terminal; never an
allow). If the CLI closes the request first, the approval ends at once, on every tab.
"""

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from api.tokens import token_record, token_still_valid
from core.errors import RateLimited
from core.limits import StreamSlot
from mcp_server import hooking, notices
from mcp_server.hook_input import CLAUDE_CODE, CODEX, NotificationInput, ToolHookInput
from mcp_server.tools import check_tool_call_rate
from mcp_server.waiting import StoppedWaiting, wait_for_outcome
from questions.approvals import ENDED_CLOSED, ENDED_TERMINAL, end_unanswered

db = database_sync_to_async
logger = logging.getLogger("parley.hooks")

MAX_BODY_BYTES = 256 * 1024

UNAUTHENTICATED = gettext_lazy(
    "Send one of your Parley API tokens as Authorization: Bearer <token>."
)
TOO_LARGE = gettext_lazy("The hook's input is larger than 256 KiB.")
NOT_JSON = gettext_lazy("The hook's input is not a JSON object.")
NOT_THIS_HOOK = gettext_lazy("This is not a hook input Parley knows for this address: %(error)s")


def _refusal(message, status: int, **headers) -> JsonResponse:
    response = JsonResponse({"message": str(message)}, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


async def _authenticated(request: HttpRequest):
    """The token's record, or None."""
    scheme, _space, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return await db(token_record)(token.strip())


def _body(request: HttpRequest) -> tuple[dict | None, JsonResponse | None]:
    """The JSON object the hook sent, or the refusal."""
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        length = 0
    if length > MAX_BODY_BYTES or len(request.body) > MAX_BODY_BYTES:
        return None, _refusal(TOO_LARGE, 413)
    try:
        value = json.loads(request.body)
    except ValueError:
        return None, _refusal(NOT_JSON, 400)
    if not isinstance(value, dict):
        return None, _refusal(NOT_JSON, 400)
    return value, None


def _invalid(error: ValidationError) -> JsonResponse:
    first = error.errors()[0] if error.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    detail = f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
    return _refusal(_(NOT_THIS_HOOK) % {"error": detail}, 400)


async def _permission_request(request: HttpRequest, agent: str) -> JsonResponse:
    record = await _authenticated(request)
    if record is None:
        return _refusal(UNAUTHENTICATED, 401, WWW_Authenticate="Bearer")
    user = record.user
    try:
        # Every call counts, whatever it holds, as every MCP tool call does.
        await db(check_tool_call_rate)(user_id=user.pk)
    except RateLimited as limited:
        return _refusal(limited.message, 429, Retry_After=str(limited.retry_after))
    body, refused = _body(request)
    if refused is not None:
        return refused
    try:
        hook = ToolHookInput.model_validate(body)
    except ValidationError as error:
        return _invalid(error)
    try:
        slot = StreamSlot(user.pk)  # a waiting request is an open stream, as the API's are
    except RateLimited as limited:
        return _refusal(limited.message, 429, Retry_After=str(limited.retry_after))
    try:
        try:
            asked = await _ask(user=user, agent=agent, hook=hook)
        except hooking.InvalidHookInput as error:
            return _refusal(_(NOT_THIS_HOOK) % {"error": error}, 400)
        except RateLimited as limited:
            return _refusal(limited.message, 429, Retry_After=str(limited.retry_after))
        if isinstance(asked, hooking.Answered):
            return JsonResponse(asked.output)
        await _wait(asked, user_id=user.pk, token_id=record.pk, slot=slot)
        return JsonResponse(await db(hooking.output_for)(waiting=asked, hook=hook))
    finally:
        slot.release()


async def _ask(*, user, agent: str, hook: ToolHookInput):
    """hooking.ask_permission, seen through: a CLI that closes the request while it is being
    asked still ends the approval it made."""
    asking = asyncio.ensure_future(db(hooking.ask_permission)(user=user, agent=agent, hook=hook))
    try:
        return await asyncio.shield(asking)
    except asyncio.CancelledError:
        asked = await asking
        if isinstance(asked, hooking.Waiting):
            await db(end_unanswered)(question_id=asked.question_id, reason=ENDED_CLOSED)
        raise


async def _wait(asked: hooking.Waiting, *, user_id: int, token_id: int, slot: StreamSlot) -> None:
    """Until the person decides, AGENT_HOOK_WAIT passes (the approval then says it was asked
    in the terminal), or the CLI closes the request (Django cancels this task: the approval
    ends at once)."""

    async def progress(_seconds: float) -> None:
        slot.touch()

    try:
        await asyncio.wait_for(
            wait_for_outcome(
                question_id=asked.question_id,
                conversation_id=asked.conversation_id,
                user_id=user_id,
                still_valid=lambda: token_still_valid(token_id),
                progress=progress,
            ),
            timeout=settings.AGENT_HOOK_WAIT,
        )
    except (TimeoutError, StoppedWaiting):
        await db(end_unanswered)(question_id=asked.question_id, reason=ENDED_TERMINAL)
    except asyncio.CancelledError:
        await asyncio.shield(db(end_unanswered)(question_id=asked.question_id, reason=ENDED_CLOSED))
        raise


@csrf_exempt
@login_not_required
@require_POST
async def claude_code_permission_request(request: HttpRequest) -> JsonResponse:
    return await _permission_request(request, CLAUDE_CODE)


@csrf_exempt
@login_not_required
@require_POST
async def codex_permission_request(request: HttpRequest) -> JsonResponse:
    return await _permission_request(request, CODEX)


@csrf_exempt
@login_not_required
@require_POST
async def claude_code_notification(request: HttpRequest) -> JsonResponse:
    record = await _authenticated(request)
    if record is None:
        return _refusal(UNAUTHENTICATED, 401, WWW_Authenticate="Bearer")
    try:
        await db(check_tool_call_rate)(user_id=record.user.pk)
    except RateLimited as limited:
        return _refusal(limited.message, 429, Retry_After=str(limited.retry_after))
    body, refused = _body(request)
    if refused is not None:
        return refused
    try:
        hook = NotificationInput.model_validate(body)
    except ValidationError as error:
        return _invalid(error)
    await db(notices.notify)(user=record.user, agent=CLAUDE_CODE, hook=hook)
    return JsonResponse({})
