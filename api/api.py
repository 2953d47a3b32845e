"""Parley's JSON API (django-ninja): /api/v1/, OpenAPI at /api/v1/openapi.json, docs at
/api/v1/docs. Every endpoint goes through the same services as the web UI."""

import re
from functools import partial
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from ninja import Field, Header, NinjaAPI, Query, Schema, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer, SessionAuth

from api import results
from api.events import Credential, EventStreamResponse, event_stream
from api.selectors import message_page, superseded_tool_calls
from api.tokens import token_record, token_still_valid
from api.waiting import wait_until_settled
from chat import services, sharing
from chat.errors import ConversationNotFound
from chat.live.sessions import session_still_valid
from chat.models import OWNER, MemberRole
from chat.selectors import (
    MAX_ID,
    Need,
    conversation_for_user,
    conversations_for_user,
    members_of,
    subagents_of,
)
from core.errors import ParleyError, RateLimited
from core.limits import StreamSlot
from questions import services as questions
from questions import tool_requests
from questions.approvals import FormField, storable
from questions.blocks import API, TERMINAL, Via
from questions.errors import NestedTooDeeply
from questions.models import QuestionKind, QuestionStatus
from questions.schemas import Question
from questions.selectors import pending_questions, questions_for_user
from questions.tool_input import text_nesting_depth

MAX_WAIT = 120.0
# A change cursor as a client sends it back: ASCII digits only (str.isdigit also accepts "²"),
# and short enough to be a bigint (int() refuses strings of more than 4,300 digits).
CURSOR = re.compile(r"[0-9]{1,18}")
# Messages in a page of GET /conversations/{id}/messages: by default, and at most. A
# conversation (GET /conversations/{id}) comes with the newest page of the default size.
PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
# Levels of arrays and objects in a request body: far more than any endpoint reads (edited
# arguments stop at questions.approvals.MAX_ARGUMENTS_DEPTH), and far less than the stack that
# parsing and checking a body need.
MAX_BODY_DEPTH = 64
BODY_TOO_DEEP = gettext_lazy(
    "The request body nests arrays and objects too deeply: at most %(limit)s levels."
)


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        record = token_record(token)
        if record is None:
            return None
        request.user = record.user
        request.api_token_id = record.pk  # event streams re-check it (api.events)
        return record.user


class Session(SessionAuth):
    """The browser's session. Only a request that carries a session cookie and no
    Authorization header is one: a wrong token is a 401, not a CSRF failure."""

    def __call__(self, request: HttpRequest):
        if "Authorization" in request.headers or not request.COOKIES.get(self.param_name):
            return None
        try:
            return super().__call__(request)
        except HttpError:
            raise HttpError(
                403, _("CSRF check failed: send the X-CSRFToken header with the session.")
            ) from None


class BoundedJson(Parser):
    """JSON bodies, refused before they are parsed when they nest deeper than MAX_BODY_DEPTH
    (Python's parser recurses, and raises RecursionError a few hundred levels down)."""

    def parse_body(self, request: HttpRequest):
        if text_nesting_depth(request.body) > MAX_BODY_DEPTH:
            raise NestedTooDeeply(BODY_TOO_DEEP % {"limit": MAX_BODY_DEPTH})
        return super().parse_body(request)


api = NinjaAPI(
    title="Parley API",
    version="1",
    description="Conversations with an agent that can pause and ask structured questions.",
    auth=[BearerToken(), Session()],
    urls_namespace="api",
    parser=BoundedJson(),
)


# --- Errors: JSON with a message ---------------------------------------------------------------


@api.exception_handler(ParleyError)
def parley_error(request, error: ParleyError):
    response = api.create_response(request, {"message": str(error.message)}, status=error.status)
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after)
    return response


@api.exception_handler(AuthenticationError)
def unauthenticated(request, error):
    message = _("Authentication required: a session or an Authorization: Bearer token.")
    return api.create_response(request, {"message": message}, status=401)


@api.exception_handler(ValidationError)
def invalid(request, error: ValidationError):
    return api.create_response(
        request, {"message": _("The request is not valid."), "errors": error.errors}, status=422
    )


@api.exception_handler(RequestDataTooBig)
def too_big(request, error):
    message = _("The request body is too large: the limit is %(limit)s KiB.") % {
        "limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
    }
    return api.create_response(request, {"message": message}, status=413)


@api.exception_handler(HttpError)
def http_error(request, error: HttpError):
    # django-ninja answers a body its parser refused with its own 400, caused by the refusal.
    if isinstance(error.__cause__, ParleyError):
        return parley_error(request, error.__cause__)
    return api.create_response(request, {"message": str(error)}, status=error.status_code)


# --- Schemas -----------------------------------------------------------------------------------


class Message(Schema):
    message: str


class ConversationIn(Schema):
    title: str = Field("", max_length=200)


class MemberOut(Schema):
    username: str
    role: str = Field(description="owner, participant (chats and answers) or viewer (reads).")
    addedAt: str


class MemberIn(Schema):
    role: MemberRole = Field(description="participant (chats and answers) or viewer (reads).")


class ConversationOut(Schema):
    id: int
    title: str
    state: str
    seq: int = Field(description="The change cursor: pass it as Last-Event-ID to /events.")
    createdAt: str
    updatedAt: str
    role: str = Field(
        "owner",
        description="Your role in it: owner, participant (chats and answers) or viewer "
        "(reads only; everything else is a 403).",
    )


class MessageOut(Schema):
    id: int
    role: str
    order: int
    text: str
    blocks: list[dict]
    isDraft: bool
    superseded: bool = Field(
        description="Replaced by Regenerate or an edit: kept, not shown, not sent to the model."
    )
    version: int
    createdAt: str


# The resolution, deadline and audit of a question, an approval or an elicitation.
RESOLUTION = Field(description="asked, replied, rejected, expired or cancelled")
EXPIRES_AT = Field(
    None, description="When the server resolves it as expired (ISO time); null: never."
)
ANSWERED_BY = Field(None, description="Who resolved it (a user name).")
ANSWERED_AT = Field(None, description="When it was resolved (ISO time).")
ANSWERED_VIA = Field(
    None, description="How: browser, api, terminal, auto-resolve, expiry or email."
)
ASSIGNED_TO = Field(
    None,
    description="The user it waits for alone, if someone assigned it; null: it waits for "
    "the conversation's owner and every participant.",
)


class PendingQuestionOut(Schema):
    """A question the model asked (one of the three question tools)."""

    conversationId: int
    toolCallId: str
    tool: Literal["question", "ask_user_question", "confirm_action"]
    questions: list[Question]
    question: str | None = Field(None, description="The only question's text (one question).")
    options: list[str] | None = Field(None, description="Its option labels (one question).")
    questionResolution: str = RESOLUTION
    expiresAt: str | None = EXPIRES_AT
    answeredBy: str | None = ANSWERED_BY
    answeredAt: str | None = ANSWERED_AT
    answeredVia: str | None = ANSWERED_VIA
    assignedTo: str | None = ASSIGNED_TO


class ApprovalDetail(Schema):
    name: str = Field(description="The tool's name as the model calls it: mcp__<server>__<tool>.")
    server: str = Field(description="The MCP server (its name in MCP_CONFIG).")
    tool: str = Field(description="The tool's own name on its server.")
    title: str = Field(description="The tool's title, else its name.")
    description: str
    arguments: dict[str, Any] = Field(description="The arguments the model called it with.")
    inputSchema: dict[str, Any] = Field(
        description="The tool's input schema (JSON Schema): edited arguments must fit it."
    )


class ApprovalOut(Schema):
    """May the agent call this tool from an MCP server with these arguments?"""

    conversationId: int
    toolCallId: str = Field(description="The tool call it is about.")
    tool: Literal["tool_approval"]
    approval: ApprovalDetail
    decision: Literal["allow", "always", "deny"] | None = Field(
        None, description="How it was decided; null while pending, expired or cancelled."
    )
    editedArguments: dict[str, Any] | None = Field(
        None, description="The arguments allowed instead of the model's; null: not edited."
    )
    feedback: str = Field("", description="What the person told the model with Deny.")
    questionResolution: str = RESOLUTION
    expiresAt: str | None = EXPIRES_AT
    answeredBy: str | None = ANSWERED_BY
    answeredAt: str | None = ANSWERED_AT
    answeredVia: str | None = ANSWERED_VIA
    assignedTo: str | None = ASSIGNED_TO


class ElicitationDetail(Schema):
    server: str = Field(description="The MCP server that asks.")
    tool: str = Field("", description="Its tool that is running and waits for the answer.")
    callId: str = Field(description="That tool's call in the transcript.")
    message: str = Field(description="What the server asks, in its own words.")
    mode: Literal["form", "url"] = Field(
        description="form: answer with values for `fields`; url: open `url`, then accept."
    )
    url: str = ""
    fields: list[FormField] = Field(
        description="The form, in order: name, kind (string, number, integer, boolean or "
        "enum), title, description, required, default, minimum, maximum, minLength, "
        "maxLength, format and, for an enum, choices ({value, title})."
    )


class ElicitationOut(Schema):
    """A running tool from an MCP server asks for values (a form) or to open a link; it waits
    for the answer while the turn runs."""

    conversationId: int
    toolCallId: str = Field(description="This request's id in the conversation.")
    tool: Literal["elicitation"]
    elicitation: ElicitationDetail
    action: Literal["accept", "decline", "cancel"] | None = Field(
        None, description="How it was answered; null while pending or when it expired."
    )
    content: dict[str, Any] | None = Field(None, description="The values sent with accept.")
    questionResolution: str = RESOLUTION
    expiresAt: str | None = EXPIRES_AT
    answeredBy: str | None = ANSWERED_BY
    answeredAt: str | None = ANSWERED_AT
    answeredVia: str | None = ANSWERED_VIA
    assignedTo: str | None = ASSIGNED_TO


# Whatever waits for a person, told apart by `tool`.
AnyQuestionOut = Annotated[
    PendingQuestionOut | ApprovalOut | ElicitationOut, Field(discriminator="tool")
]
PENDING_QUESTIONS = Field(
    description="Everything that waits for an answer now, in the order asked: the paused "
    "turn's question or approvals (several approvals of one step wait together), and the "
    "elicitations of a tool that is running."
)
PENDING_QUESTION = Field(
    None,
    description="What the paused turn waits for (the first of `pendingQuestions`); null "
    "unless the agent's state is awaiting_user.",
)


class SubagentOut(ConversationOut):
    toolCallId: str = Field(description="The parent's spawn_agents call that started it.")
    number: int = Field(description="Its task's place in that call, from 1.")
    status: str = Field(description="running, done, failed or stopped")
    superseded: bool = Field(
        description="Its spawn_agents call was replaced by Regenerate or an edit: kept for the "
        "record, like the call's message, but no longer part of the conversation."
    )
    messages: list[MessageOut]


class MessagePage(Schema):
    messages: list[MessageOut] = Field(
        description="Consecutive messages of the conversation, in transcript order (ascending "
        "`order`), superseded ones included."
    )
    before: int | None = Field(
        description="Pass it as ?before= for the messages just older than these; null when "
        "there are none (these start the transcript, or the page is empty)."
    )
    after: int | None = Field(
        description="Pass it as ?after= for the messages just newer than these; null when there "
        "are none yet (these end the transcript, or the page is empty)."
    )


class ConversationDetail(ConversationOut):
    pendingQuestion: AnyQuestionOut | None = PENDING_QUESTION
    pendingQuestions: list[AnyQuestionOut] = PENDING_QUESTIONS
    messages: list[MessageOut] = Field(
        description=f"The newest messages (at most {PAGE_SIZE}), in transcript order, "
        "superseded ones included."
    )
    messagesBefore: int | None = Field(
        description="Pass it as ?before= to GET /conversations/{id}/messages for the older "
        "messages; null when `messages` is the whole transcript."
    )
    children: list[SubagentOut] = Field(
        description="The sub-agents this conversation's agent started, in order."
    )


class AgentResult(Schema):
    status: str = Field(description="complete, needs_input, running, interrupted or error")
    conversationId: int
    response: str
    pendingQuestion: AnyQuestionOut | None = PENDING_QUESTION
    pendingQuestions: list[AnyQuestionOut] = PENDING_QUESTIONS
    messages: list[MessageOut]


class PostMessage(Schema):
    content: str = Field(max_length=200_000)
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


class Respond(Schema):
    answers: dict[str, str | list[str]] = Field(
        description="Question text -> the chosen label, typed text, or a list of labels."
    )
    toolCallId: str | None = Field(None, description="Refuse if another question is pending.")
    wait: float = Field(0, ge=0, le=MAX_WAIT)


class Cancel(Schema):
    wait: float = Field(0, ge=0, le=MAX_WAIT)


class Decide(Schema):
    decision: Literal["allow", "always", "deny"] = Field(
        description="allow: run the call once; always: run it, and never ask again about this "
        "tool in the turns you start (not in someone else's turn in a shared conversation); "
        "deny: do not run it."
    )
    arguments: dict[str, Any] | None = Field(
        None,
        description="With allow or always: the arguments to run it with instead of the "
        "model's; they must fit the tool's input schema.",
    )
    feedback: str | None = Field(None, description="With deny: what to tell the model.")
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


class Elicit(Schema):
    action: Literal["accept", "decline", "cancel"] = Field(
        description="accept: send `content` (form) or say the link was opened (url); decline: "
        "refuse; cancel: dismiss without deciding."
    )
    content: dict[str, Any] | None = Field(
        None,
        description="With accept, for a form: field name -> value (a string, number or "
        "boolean; an enum's choice by its value). Optional fields may be left out.",
    )
    wait: float = Field(0, ge=0, le=MAX_WAIT, description="Seconds to wait for the agent.")


# --- Endpoints ---------------------------------------------------------------------------------

ERRORS = {401: Message, 404: Message, 409: Message, 413: Message, 422: Message, 429: Message}


@api.get("/conversations", response={200: list[ConversationOut], 401: Message}, by_alias=True)
def list_conversations(request):
    return [results.conversation_data(c) for c in conversations_for_user(user=request.user)]


@api.post("/conversations", response={201: ConversationOut, **ERRORS}, by_alias=True)
def create_conversation(request, body: ConversationIn):
    conversation = services.create_conversation(owner=request.user, title=body.title)
    return Status(201, results.conversation_data(conversation))


@api.get(
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


@api.get(
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


@api.post(
    "/conversations/{conversation_id}/messages",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def post_message(request, conversation_id: int, body: PostMessage):
    """Send a message. While a question is pending, the message answers it (as in the UI)."""
    message = await sync_to_async(services.post_user_message)(
        user=request.user, conversation_id=conversation_id, text=body.content
    )
    return await _result(request, conversation_id, body.wait, since_order=message.order)


@api.post(
    "/conversations/{conversation_id}/respond", response={200: AgentResult, **ERRORS}, by_alias=True
)
async def respond(request, conversation_id: int, body: Respond):
    """Answer the pending question: one entry per question text. An approval or an
    elicitation is answered at its own endpoint (409 here)."""
    reply = await sync_to_async(_answer_by_text)(
        user=request.user,
        conversation_id=conversation_id,
        answers=body.answers,
        tool_call_id=body.toolCallId,
        via=channel(request),
    )
    return await _result(request, conversation_id, body.wait, since_order=reply.order)


@api.post(
    "/conversations/{conversation_id}/cancel", response={200: AgentResult, **ERRORS}, by_alias=True
)
async def cancel(request, conversation_id: int, body: Cancel | None = None):
    """Reject the pending question, or stop the running turn."""
    since = await sync_to_async(_next_order)(request.user, conversation_id)
    await sync_to_async(questions.cancel)(
        user=request.user, conversation_id=conversation_id, via=channel(request)
    )
    return await _result(
        request, conversation_id, body.wait if body else 0, since_order=since, interrupted=True
    )


@api.post(
    "/conversations/{conversation_id}/approvals/{tool_call_id}",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def decide(request, conversation_id: int, tool_call_id: str, body: Decide):
    """Decide a pending approval of a tool call (`toolCallId` of the approval). The paused
    step goes on once every approval it waits for is decided."""
    since = await sync_to_async(_next_order)(request.user, conversation_id)
    await sync_to_async(tool_requests.decide)(
        user=request.user,
        conversation_id=conversation_id,
        tool_call_id=tool_call_id,
        decision=body.decision,
        arguments=storable(body.arguments),
        feedback=body.feedback or "",
        via=channel(request),
    )
    return await _result(request, conversation_id, body.wait, since_order=since)


@api.post(
    "/conversations/{conversation_id}/elicitations/{tool_call_id}",
    response={200: AgentResult, **ERRORS},
    by_alias=True,
)
async def elicitation(request, conversation_id: int, tool_call_id: str, body: Elicit):
    """Answer a running tool's elicitation (`toolCallId` of the elicitation): accept with the
    form's `content`, decline or cancel. The tool goes on with the answer."""
    since = await sync_to_async(_next_order)(request.user, conversation_id)
    await sync_to_async(tool_requests.answer_elicitation)(
        user=request.user,
        conversation_id=conversation_id,
        tool_call_id=tool_call_id,
        action=body.action,
        values=storable(body.content or {}),
        via=channel(request),
    )
    return await _result(request, conversation_id, body.wait, since_order=since)


@api.get("/conversations/{conversation_id}/events", response={200: None, **ERRORS}, by_alias=True)
async def events(
    request,
    conversation_id: int,
    after: int | None = Query(None, ge=0, le=10**18),
    last_event_id: str | None = Header(
        None,
        alias="Last-Event-ID",
        description="The id of the last event received: resume after it (a whole number).",
    ),
):
    """Server-sent events: `state_change`, `message` and `text` (streamed text); event ids
    increase, and a reconnect with Last-Event-ID resumes without gaps."""
    last_id = last_event_id or (str(after) if after is not None else "")
    if last_id and not CURSOR.fullmatch(last_id):
        raise HttpError(
            422, _("Last-Event-ID must be an event id from this stream (a whole number).")
        )
    cursor = int(last_id) if last_id else None
    slot = StreamSlot(request.user.pk)  # raises TooManyStreams (before any database work)
    try:
        await sync_to_async(conversation_for_user)(
            user=request.user, conversation_id=conversation_id
        )
    except ConversationNotFound:
        slot.release()
        raise
    response = EventStreamResponse(
        event_stream(request.user, conversation_id, cursor, credential_check(request), slot),
        slot=slot,
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response


# --- Members: whom a conversation is shared with ---------------------------------------------

MEMBER_ERRORS = {**ERRORS, 400: Message, 403: Message}


@api.get(
    "/conversations/{conversation_id}/members",
    response={200: list[MemberOut], **ERRORS},
    by_alias=True,
)
def list_members(request, conversation_id: int):
    """The conversation's owner, then the people it is shared with, first added first. Anyone
    who may read the conversation may read this."""
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    return _members(conversation)


@api.put(
    "/conversations/{conversation_id}/members/{username}",
    response={200: list[MemberOut], **MEMBER_ERRORS},
    by_alias=True,
)
def put_member(request, conversation_id: int, username: str, body: MemberIn):
    """Share the conversation with `username` in `role`, or change their role: what the Share
    panel's Add does. Only the owner may. The members as they are now."""
    membership = sharing.share_conversation(
        user=request.user, conversation_id=conversation_id, username=username, role=body.role
    )
    return _members(membership.conversation)


@api.delete(
    "/conversations/{conversation_id}/members/{username}",
    response={200: list[MemberOut], **MEMBER_ERRORS},
    by_alias=True,
)
def delete_member(request, conversation_id: int, username: str):
    """Stop sharing the conversation with `username`: their open pages and streams of it
    close. Only the owner may. The members as they are now."""
    conversation = conversation_for_user(
        user=request.user, conversation_id=conversation_id, need=Need.MANAGE
    )
    member = next((m for m in members_of(conversation) if m.user.get_username() == username), None)
    if member is None:
        raise sharing.SharingRefused(sharing.NO_SUCH_MEMBER)
    sharing.remove_member(
        user=request.user, conversation_id=conversation_id, member_id=member.user_id
    )
    return _members(conversation)


def _members(conversation) -> list[dict]:
    owner = {
        "username": conversation.owner.get_username(),
        "role": OWNER,
        "addedAt": conversation.created_at.isoformat(),
    }
    return [owner] + [
        {"username": m.user.get_username(), "role": m.role, "addedAt": m.added_at.isoformat()}
        for m in members_of(conversation)
    ]


# At most this many questions in a listing: the most recent.
QUESTIONS_LISTED = 100


@api.get("/questions", response={200: list[AnyQuestionOut], **ERRORS}, by_alias=True)
def list_questions(request, status: QuestionStatus = QuestionStatus.PENDING):
    """The user's questions, approvals and elicitations in every conversation with one
    status: `pending` (waiting for an answer, the most recently asked first), or `answered`,
    `auto_resolved`, `rejected`, `expired`, `cancelled` (the most recently resolved first); at
    most 100. `tool` tells them apart."""
    found = questions_for_user(user=request.user, status=status)[:QUESTIONS_LISTED]
    return [results.question_data(q) for q in found]


# --- Helpers -----------------------------------------------------------------------------------

# The terminal client (`manage.py chat`) names itself in this header; the audit then records
# its answers as given through the terminal rather than the API.
CLIENT_HEADER = "X-Parley-Client"
TERMINAL_CLIENT = "terminal"


def channel(request) -> Via:
    """The channel a question is answered through, for the audit (answeredVia)."""
    return TERMINAL if request.headers.get(CLIENT_HEADER) == TERMINAL_CLIENT else API


def credential_check(request) -> Credential:
    """How an event stream re-checks what authenticated it: the Bearer token, or the session."""
    token_id = getattr(request, "api_token_id", None)
    if token_id is not None:
        return Credential(user_id=request.user.pk, still_valid=partial(token_still_valid, token_id))
    session_key = request.session.session_key
    return Credential(
        user_id=request.user.pk,
        still_valid=partial(session_still_valid, session_key, request.user.pk),
        session_key=session_key,
    )


async def _result(request, conversation_id: int, wait: float, **options) -> dict:
    if wait > 0:
        await wait_until_settled(conversation_id, wait)
        # The credential may have ended while the call waited (chat.sessions).
        if not await sync_to_async(credential_check(request).still_valid)():
            raise AuthenticationError
    return await sync_to_async(_agent_result)(request.user, conversation_id, **options)


def _agent_result(user, conversation_id: int, **options) -> dict:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id)
    return results.agent_result(conversation, **options)


class NotAQuestion(ParleyError):
    """What waits is an approval or an elicitation, which /respond cannot answer."""

    status = 409


def _answer_by_text(*, user, conversation_id: int, answers, tool_call_id, via: Via):
    """questions.answer_question_by_text, once the pending thing is known to be a question."""
    with transaction.atomic():
        conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
        waiting = pending_questions(conversation)
        if waiting and all(q.is_tool_request for q in waiting):
            first = waiting[0]
            if first.kind == QuestionKind.TOOL_APPROVAL:
                message = _(
                    "A tool call waits for approval, not an answer: decide it with POST "
                    "/api/v1/conversations/%(id)s/approvals/%(call)s."
                )
            else:
                message = _(
                    "A tool asks for values, not an answer: reply with POST "
                    "/api/v1/conversations/%(id)s/elicitations/%(call)s."
                )
            raise NotAQuestion(message % {"id": conversation_id, "call": first.tool_call_id})
        return questions.answer_question_by_text(
            user=user,
            conversation_id=conversation_id,
            answers=answers,
            tool_call_id=tool_call_id,
            via=via,
        )


def _next_order(user, conversation_id: int) -> int:
    """Where messages written from now on start (the transcript's length)."""
    return conversation_for_user(user=user, conversation_id=conversation_id).messages.count()
