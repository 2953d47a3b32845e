"""Asking for an agent outside Parley (an MCP client), and noting that its answer reached it.

A call is asked in a conversation of that client's (chat.models.Agent.EXTERNAL), one per
client session, titled after the client: the call is stored as the agent's message, and the
question shown and the conversation paused in the same transaction, by the same services as
Parley's own agent's question tools (chat.engine.turns.begin_external_call, then
questions.asking.ask). From there it is a question like any other: the inbox, the count,
notifications, webhooks, its deadline and its audit. An answer ends that conversation's turn
instead of asking a model (chat.engine.turns.resume), and the waiting call reads the row.
"""

import hashlib
import json
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from chat import services as chat_services
from chat.engine import turns
from chat.errors import ConversationNotFound
from chat.models import Agent, AgentState
from chat.selectors import conversation_for_user
from chat.transcript import Transcript
from core import limits
from core.text import clean_text
from mcp_server.models import AgentCall
from questions import asking
from questions.models import Question
from questions.schemas import QuestionRequest, normalise

# The longest client name, version and session id kept (a conversation's title holds the
# name too).
CLIENT_NAME_CHARS = AgentCall._meta.get_field("client_name").max_length
CLIENT_VERSION_CHARS = AgentCall._meta.get_field("client_version").max_length
SESSION_ID_CHARS = AgentCall._meta.get_field("session_id").max_length
# A client that does not name itself.
UNNAMED_CLIENT = "MCP client"


@dataclass(frozen=True)
class Client:
    """Who calls: the client as it named itself (clientInfo), and its MCP session."""

    name: str
    version: str = ""
    session_id: str = ""


def ask(*, user, client: Client, tool: str, arguments: object, request_key: str = "") -> AgentCall:
    """Ask the user the question of a `tool` call (`ask_user_question`, `confirm_action`).

    With a `request_key`, the user's call with that key returns its question (and, once
    resolved, its outcome) however often it is made: never a second question. Without one,
    the same call made again while an earlier one's answer has not reached the client (the
    first was lost to a restart or a dropped connection) returns that earlier call, answered
    or not, instead of asking twice. Raises ValueError (the arguments break the tool's schema
    or a limit: the same validation as Parley's own agent's), TooManyMessages or
    TooManyConversations (core.limits: each new question counts as a message sent).
    """
    if request_key and (keyed := keyed_call(user=user, request_key=request_key)) is not None:
        return keyed
    request = normalise(tool, arguments)
    check_storable(arguments)
    client = Client(
        name=clean_text(client.name)[:CLIENT_NAME_CHARS] or UNNAMED_CLIENT,
        version=clean_text(client.version)[:CLIENT_VERSION_CHARS],
        session_id=clean_text(client.session_id)[:SESSION_ID_CHARS],
    )
    fingerprint = _fingerprint(tool, arguments)
    if not request_key:
        earlier = undelivered_call(user=user, client=client, fingerprint=fingerprint)
        if earlier is not None:
            return earlier
    limits.check_message_rate(user=user)
    try:
        return _ask(
            user=user,
            client=client,
            request=request,
            arguments=arguments,
            fingerprint=fingerprint,
            request_key=request_key,
        )
    except IntegrityError:  # the same key, asked at the same moment by another call
        keyed = keyed_call(user=user, request_key=request_key)
        if keyed is None:
            raise
        return keyed


def call_for_user(*, user, question_id: object) -> AgentCall | None:
    """The user's call whose question is `question_id` (get_answer); None for anyone else's."""
    try:
        number = int(str(question_id))
    except ValueError:
        return None
    if not 0 < number < 2**63:
        return None
    return (
        AgentCall.objects.select_related("question").filter(user=user, question_id=number).first()
    )


def keyed_call(*, user, request_key: str) -> AgentCall | None:
    """The user's call made with `request_key`, if any."""
    return AgentCall.objects.filter(user=user, request_key=request_key).first()


def undelivered_call(*, user, client: Client, fingerprint: str) -> AgentCall | None:
    """The client's newest call with these arguments whose outcome it has not received."""
    return (
        AgentCall.objects.filter(
            user=user, client_name=client.name, fingerprint=fingerprint, delivered_at__isnull=True
        )
        .order_by("-created_at", "-id")
        .first()
    )


@transaction.atomic
def _ask(
    *,
    user,
    client: Client,
    request: QuestionRequest,
    arguments: dict,
    fingerprint: str,
    request_key: str = "",
) -> AgentCall:
    conversation = session_conversation(user=user, client=client)
    with Transcript(conversation) as transcript:
        lease, call = turns.begin_external_call(transcript, name=request.tool, arguments=arguments)
    # A new turn of a conversation with no pause yet: within any limit of pauses.
    asked = asking.ask(lease, call, request, limit=1)
    assert asked
    question = Question.objects.get(conversation_id=conversation.pk, tool_call_id=call.id)
    return AgentCall.objects.create(
        question=question,
        user=user,
        client_name=client.name,
        client_version=client.version,
        session_id=client.session_id,
        fingerprint=fingerprint,
        request_key=request_key,
    )


def session_conversation(*, user, client: Client):
    """The conversation this client session asks in, locked: the one of its newest call,
    unless it waits for an answer already (a call made while another waits gets a conversation
    of its own) or is gone; else a new one, titled after the client."""
    newest = (
        AgentCall.objects.filter(user=user, client_name=client.name, session_id=client.session_id)
        .order_by("-created_at", "-id")
        .values_list("question__conversation_id", flat=True)
        .first()
    )
    if newest is not None:
        try:
            conversation = conversation_for_user(user=user, conversation_id=newest, lock=True)
        except ConversationNotFound:
            conversation = None
        if conversation is not None and conversation.agent_state in (
            AgentState.IDLE,
            AgentState.ERROR,
        ):
            return conversation
    created = chat_services.create_conversation(owner=user, title=client.name, agent=Agent.EXTERNAL)
    return conversation_for_user(user=user, conversation_id=created.pk, lock=True)


def mark_delivered(*, call_id: int) -> None:
    """The call's outcome was returned to the client: a call made again asks anew."""
    AgentCall.objects.filter(pk=call_id, delivered_at__isnull=True).update(
        delivered_at=timezone.now()
    )


def check_storable(value: object) -> None:
    """Raise ValueError if the arguments hold a character no database stores (NUL, or half of
    a surrogate pair): the call is kept as it was made, so it is refused, not changed."""
    if isinstance(value, str):
        if "\x00" in value or any("\ud800" <= char <= "\udfff" for char in value):
            raise ValueError(_("the arguments contain a NUL or an unpaired surrogate character"))
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(key)
            check_storable(item)
    elif isinstance(value, list):
        for item in value:
            check_storable(item)


def _fingerprint(tool: str, arguments: object) -> str:
    canonical = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
