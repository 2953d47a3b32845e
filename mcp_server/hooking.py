"""An agent CLI's permission hook asks the token's user (Claude Code, Codex).

A tool call the CLI wants to make becomes an approval (the same Question row, block and
controls as an MCP tool's approval: questions.asking.ask_approvals) in a conversation of that
agent session's (chat.models.Agent.EXTERNAL, titled after the CLI and the last segment of its
working directory), found through the session's newest AgentCall as an MCP client's is
(mcp_server.services.session_conversation). Claude Code's own AskUserQuestion becomes a Parley
question instead, answered through `updatedInput`.

The request that asked waits for the row (mcp_server.hook_views) and answers with what the
person decided; a decision is bound to that one request, which carries the session and the
exact input the person saw: a replayed or edited input asks again. Nothing a CLI sends
resolves a question, and no timeout or error ever allows: they answer with no decision.
"""

import hashlib
import json
import logging
import posixpath
from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from chat.engine import turns
from chat.errors import AgentBusy
from chat.models import Conversation
from chat.transcript import Transcript, lock
from core import limits
from core.text import clean_text
from mcp_server.hook_input import (
    ALLOW,
    ASK_USER_QUESTION,
    CLIENT_NAMES,
    DENY,
    PERMISSION_REQUEST,
    ToolHookInput,
    decision,
    no_decision,
)
from mcp_server.models import AgentCall
from mcp_server.services import (
    CLIENT_NAME_CHARS,
    SESSION_ID_CHARS,
    Client,
    check_storable,
    session_conversation,
)
from questions import asking, rules
from questions.models import Question, QuestionKind, QuestionStatus
from questions.payloads import ALWAYS, ApprovalRequest
from questions.schemas import TOOL_ASK_USER_QUESTION, normalise

logger = logging.getLogger("parley.hooks")

# What the model reads when the person denies without feedback, or declines a question.
DENIED = "The user denied this tool call in Parley."
DECLINED_QUESTION = "The user declined to answer in Parley."
# A rule that denies, as the model reads it.
DENIED_BY_RULE = "A Parley rule denies this tool call."

# What the card calls each tool the CLIs name (the title; the tool's name is shown too).
TITLES = {
    "Bash": _("Run a command"),
    "Write": _("Write a file"),
    "Edit": _("Edit a file"),
    "MultiEdit": _("Edit a file"),
    "NotebookEdit": _("Edit a notebook"),
    "WebFetch": _("Fetch a web page"),
    "WebSearch": _("Search the web"),
    "Read": _("Read a file"),
}


class InvalidHookInput(ValueError):
    """The input cannot be asked (a NUL, a question Parley cannot show); the message says
    why."""


@dataclass(frozen=True)
class Waiting:
    """A call that waits for the person: its row, and the input it was asked with."""

    question_id: int
    conversation_id: int
    call_id: int


@dataclass(frozen=True)
class Answered:
    """A call answered at once (by a rule): the hook output."""

    output: dict


def client_for(*, agent: str, session_id: str, cwd: str) -> Client:
    """The session as a Client: named after the CLI and its working directory's last segment
    (the conversation's title)."""
    folder = posixpath.basename(cwd.replace("\\", "/").rstrip("/")) if cwd else ""
    name = CLIENT_NAMES[agent] + (f" · {folder}" if folder else "")
    return Client(
        name=clean_text(name)[:CLIENT_NAME_CHARS],
        version="",
        session_id=clean_text(session_id)[:SESSION_ID_CHARS],
    )


def ask_permission(*, user, agent: str, hook: ToolHookInput) -> Waiting | Answered:
    """Ask the user about the hook's tool call, unless a rule answers it at once. Counts as a
    message sent (core.limits). Raises InvalidHookInput, TooManyMessages,
    TooManyConversations."""
    try:
        check_storable(hook.tool_input)
    except ValueError as error:
        raise InvalidHookInput(str(error)) from None
    client = client_for(agent=agent, session_id=hook.session_id, cwd=hook.cwd)
    # A question is the person's to answer: no rule answers it.
    verdict = (
        rules.Verdict(effect=rules.ASK)
        if hook.tool_name == ASK_USER_QUESTION
        else rule_verdict(
            user=user,
            conversation=_session_conversation(user=user, client=client),
            agent=agent,
            tool=hook.tool_name,
            arguments=hook.tool_input,
        )
    )
    if verdict.effect in (ALLOW, DENY):
        if verdict.rule is not None:
            _record_rule_decision(user=user, agent=agent, client=client, hook=hook, verdict=verdict)
        message = DENIED_BY_RULE if verdict.effect == DENY else ""
        return Answered(decision(hook.hook_event_name, verdict.effect, message=message))
    request = None
    if hook.tool_name == ASK_USER_QUESTION:
        try:
            request = normalise(TOOL_ASK_USER_QUESTION, hook.tool_input)
        except ValueError as error:
            raise InvalidHookInput(str(error)) from None
    limits.check_message_rate(user=user)
    return _ask(user=user, agent=agent, client=client, hook=hook, request=request, verdict=verdict)


def _session_conversation(*, user, client: Client) -> Conversation | None:
    """The conversation the session asked in last, if any (for rules scoped to it)."""
    conversation_id = (
        AgentCall.objects.filter(user=user, client_name=client.name, session_id=client.session_id)
        .order_by("-created_at", "-id")
        .values_list("question__conversation_id", flat=True)
        .first()
    )
    if conversation_id is None:
        return None
    return Conversation.objects.filter(pk=conversation_id, deleted_at__isnull=True).first()


def rule_verdict(*, user, conversation, agent: str, tool: str, arguments: dict) -> rules.Verdict:
    """The one place a CLI's call meets the approval rules (questions.rules, one policy for
    every agent; an agent CLI's tools belong to no MCP server). Any error while evaluating
    asks the person: a rule never allows by accident."""
    try:
        return rules.evaluate(
            user=user,
            conversation=conversation,
            agent=agent,
            server="",
            tool=tool,
            arguments=arguments,
        )
    except Exception:  # questions.rules asks on its own errors; this is the boundary's guard
        logger.exception("Evaluating the rules for %s's %s failed", agent, tool)
        return rules.Verdict(effect=rules.ASK, failed=True)


def approval_request(*, agent: str, hook: ToolHookInput, verdict=None) -> ApprovalRequest:
    """What the person sees of a CLI's tool call: the same approval as an MCP tool's; with the
    rules' `verdict`, the rule that made it ask (its quorum, if it wants several people's
    Allow) and the shadow rules that matched it."""
    return ApprovalRequest.of(
        name=hook.tool_name,
        server="",
        agent=agent,
        tool=hook.tool_name,
        title=str(TITLES.get(hook.tool_name, "")) or hook.tool_name,
        description=str(hook.tool_input.get("description") or ""),
        arguments=hook.tool_input,
        input_schema={"type": "object"},
        asked_by=verdict.note if verdict is not None and verdict.effect == rules.ASK else None,
        shadow=[rule.note() for rule in verdict.shadow] if verdict is not None else None,
    )


@transaction.atomic
def _record_rule_decision(*, user, agent: str, client: Client, hook: ToolHookInput, verdict):
    """A rule answered the CLI's call at once: its approval, resolved by the rule and naming it
    (the audit), in the session's conversation, as a rule's decision on a call of Parley's own
    agent is shown. A session whose conversation waits on another call gets the answer all
    the same; the decision is then in the log only."""
    conversation = session_conversation(user=user, client=client)
    try:
        with Transcript(conversation) as transcript:
            lease, call = turns.begin_external_call(
                transcript, name=hook.tool_name, arguments=hook.tool_input
            )
    except AgentBusy:
        return
    asking.record_rule_decision(
        lease,
        call,
        approval_request(agent=agent, hook=hook),
        decision=verdict.effect,
        rule=verdict.rule.note(),
    )
    with Transcript(lock(conversation.pk)) as transcript:
        turns.resume_tools(transcript)  # an external turn ends there: the CLI runs it, or not


@transaction.atomic
def _ask(
    *, user, agent: str, client: Client, hook: ToolHookInput, request, verdict=None
) -> Waiting:
    conversation = session_conversation(user=user, client=client)
    with Transcript(conversation) as transcript:
        lease, call = turns.begin_external_call(
            transcript, name=hook.tool_name, arguments=hook.tool_input
        )
    if request is not None:
        asked = asking.ask(lease, call, request, limit=1)
        assert asked
    else:
        asking.ask_approvals(
            lease, [(call, approval_request(agent=agent, hook=hook, verdict=verdict))]
        )
    question = Question.objects.get(conversation_id=conversation.pk, tool_call_id=call.id)
    record = AgentCall.objects.create(
        question=question,
        user=user,
        client_name=client.name,
        session_id=client.session_id,
        fingerprint=_fingerprint(hook),
    )
    return Waiting(question_id=question.pk, conversation_id=conversation.pk, call_id=record.pk)


def output_for(*, waiting: Waiting, hook: ToolHookInput) -> dict:
    """The hook output for the call's row as it is now: the person's decision, or none (still
    pending, cancelled, expired, deleted: the CLI asks in its terminal; never an allow)."""
    question = Question.objects.filter(pk=waiting.question_id).first()
    event = hook.hook_event_name or PERMISSION_REQUEST
    if question is None or question.status not in (
        QuestionStatus.ANSWERED,
        QuestionStatus.REJECTED,
    ):
        return no_decision()
    AgentCall.objects.filter(pk=waiting.call_id, delivered_at__isnull=True).update(
        delivered_at=question.answered_at
    )
    decided = question.answers if isinstance(question.answers, dict) else {}
    if question.kind == QuestionKind.TOOL_APPROVAL:
        if question.status == QuestionStatus.ANSWERED and decided.get("decision") in (
            ALLOW,
            ALWAYS,
        ):
            return decision(event, ALLOW, updated_input=decided.get("arguments"))
        return decision(event, DENY, message=decided.get("feedback") or DENIED)
    if question.status == QuestionStatus.ANSWERED and isinstance(question.answers, list):
        return decision(event, ALLOW, updated_input=answered_input(question, hook.tool_input))
    return decision(event, DENY, message=DECLINED_QUESTION)


def answered_input(question: Question, tool_input: dict) -> dict:
    """AskUserQuestion's input with the person's answers, as Claude Code reads them from an
    allow's updatedInput: `answers` maps each question's text to the chosen labels (several
    joined by ", ") or the typed text."""
    answers = {}
    for asked, given in zip(question.request.questions, question.answers, strict=False):
        chosen = list(given.get("labels") or [])
        if given.get("custom"):
            chosen.append(given["custom"])
        answers[asked.text] = ", ".join(chosen)
    return {**tool_input, "answers": answers}


def _fingerprint(hook: ToolHookInput) -> str:
    canonical = json.dumps(
        [hook.session_id, hook.tool_name, hook.tool_input],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
