"""Approvals decided: may the agent call this tool with these arguments? Allow (as called, or
with the arguments edited and checked against the tool's input schema), Always allow, or
Deny with feedback; a message the person sends denies every approval waiting; and what the
runner reads of each call's decision.

An approval pauses the turn like a question (questions.asking.ask_approvals). Several calls of
one step that need approval are asked together, one row each (their card offers "Allow all" and
"Deny all": `decide_all`), and the step goes on (turns.resume_tools) once every one of them is
decided; the runner then reads each call's decision (`decision_for`) and runs, denies or skips
it. While the conversation's "a deny stops the step" is on (Conversation.deny_stops_step), a
person's Deny of one call denies the step's other waiting calls with it, and its calls already
allowed do not run either: the model is told which call was denied, and why. Deciding is the
same first-wins conditional update of a pending row as any resolution
(questions.resolving.resolve), in the transaction that rewrites the block.
"""

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Subquery
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from chat.blocks import ToolResultBlock, parse_blocks
from chat.engine import dispatch, turns
from chat.models import AgentState, Conversation, Message
from chat.selectors import conversation_for_user
from chat.transcript import Transcript
from core.text import clean_text
from questions import rules
from questions.answers import APPROVALS_PENDING, reply_text
from questions.errors import InvalidAnswer, NestedTooDeeply, QuestionAlreadyResolved
from questions.models import AnsweredVia, ApprovalVote, Question, QuestionKind, QuestionStatus
from questions.payloads import (
    ALLOW,
    ALWAYS,
    AUTO_RESOLVE,
    BROWSER,
    DENY,
    MAX_ARGUMENTS_CHARS,
    Via,
    arguments_digest,
    clip,
    storable,
)
from questions.resolving import resolve, resume_if_decided, sharing_messages, write_block
from questions.selectors import question_for_user
from questions.tool_input import (
    UncheckablePattern,
    nesting_depth,
    schema_error,
    text_nesting_depth,
)

# Levels of arrays and objects in edited arguments, the arguments object itself included.
MAX_ARGUMENTS_DEPTH = 32
MAX_FEEDBACK_CHARS = 2_000

BAD_JSON = _("The arguments are not valid JSON: %(error)s")
NOT_AN_OBJECT = _("The arguments must be a JSON object.")
SCHEMA_MISMATCH = _("The arguments do not fit the tool's input schema: %(error)s")
PATTERN_UNCHECKABLE = _(
    "Parley cannot check edited arguments against this tool's input schema: its pattern "
    "%(pattern)s could take too long to match. Allow the call as the agent made it, or deny it."
)
ARGUMENTS_TOO_LONG = _("The arguments are too long.")
ARGUMENTS_TOO_DEEP = _(
    "The arguments nest arrays and objects too deeply: at most %(limit)s levels."
)
FEEDBACK_TOO_LONG = _("The feedback is too long.")
ALLOWED_AS_ASKED = _(
    "This approval needs several people's Allow: it is allowed as it was asked, without edits "
    "and without Always allow."
)
NOT_YOUR_OWN = _(
    "This approval needs other people's Allow: not the Allow of the person the agent works for."
)
NOT_AN_APPROVER = _("Only the approvers its rule names can allow this call.")
VOTED_ALREADY = _("You already decided on this call: it waits for another person.")
ONE_BY_ONE = _("One of these calls needs several people's Allow: allow each on its own.")
NOT_ONE_STEP = _("These approvals are not of one step: decide each on its own.")
CHANGED_SINCE_SEEN = _(
    "These calls are not the ones on your page any more: nothing was decided. Look at them again."
)


class InvalidInput(ValueError):
    """What a person entered cannot be used; the message says why (translated)."""


@dataclass(frozen=True)
class Decided:
    """How a call's approval ended, for the runner: `decision` allow, always or deny; None
    when nobody decided in time (expired) or it was cancelled."""

    status: str
    decision: str | None
    arguments: dict | None  # the edited arguments, if the person edited them
    feedback: str
    # The rule that decided it without asking (questions.payloads.RuleNote's fields), if any.
    rule: dict | None = None
    # A person denied another call of its step while "a deny stops the step" was on: that
    # call's title and feedback. The call does not run, even if it was allowed.
    stopped_by: "Stopped | None" = None
    # Who allowed it, when its rule wanted several people's Allow.
    votes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stopped:
    title: str
    feedback: str


def decision_for(conversation_id: int, call_id: str) -> Decided | None:
    """The decision on the call's approval, or None if it was never asked (or is pending)."""
    row = (
        Question.objects.filter(
            conversation_id=conversation_id, tool_call_id=call_id, kind=QuestionKind.TOOL_APPROVAL
        )
        .exclude(status=QuestionStatus.PENDING)
        .only(
            "status",
            "answers",
            "answered_via",
            "message_id",
            "subagent_id",
            "conversation__deny_stops_step",
        )
        .select_related("conversation")
        .first()
    )
    if row is None:
        return None
    decided = row.answers if isinstance(row.answers, dict) else {}
    stopped = None
    if decided.get("stoppedBy"):
        stopped = Stopped(title=decided["stoppedBy"], feedback=decided.get("feedback", ""))
    elif row.status == QuestionStatus.ANSWERED and row.conversation.deny_stops_step:
        stopped = _denied_in_step(row)
    return Decided(
        status=row.status,
        decision=decided.get("decision"),
        arguments=decided.get("arguments"),
        feedback=decided.get("feedback", ""),
        rule=decided.get("rule") if row.answered_via == AnsweredVia.RULE else None,
        stopped_by=stopped,
        votes=tuple(decided.get("votes", ())),
    )


def _denied_in_step(row: Question) -> Stopped | None:
    """The call of `row`'s step a person denied (not a rule, not denied with another), if any."""
    denied = (
        _step_approvals(row)
        .filter(status=QuestionStatus.REJECTED)
        .exclude(answered_via=AnsweredVia.RULE)
        .exclude(answers__has_key="stoppedBy")
        .order_by("answered_at", "pk")
        .first()
    )
    if denied is None:
        return None
    feedback = denied.answers.get("feedback", "") if isinstance(denied.answers, dict) else ""
    return Stopped(title=denied.approval.title, feedback=feedback)


def _step_approvals(question: Question):
    """The approvals asked with `question`: those of its step (the calls' message). A
    sub-agent's approval is asked alone: its call waits for it as it runs."""
    rows = Question.objects.filter(
        conversation_id=question.conversation_id,
        message_id=question.message_id,
        kind=QuestionKind.TOOL_APPROVAL,
    )
    if question.subagent_id is not None:
        return rows.filter(pk=question.pk)
    return rows.filter(subagent__isnull=True)


# Parley's own agent, as the rules name it (questions.models.AgentKind).
PARLEY = "parley"


def verdict_for(
    conversation_id: int,
    *,
    server: str,
    tool: str,
    arguments: dict,
    default: str,
    spend: bool = True,
) -> rules.Verdict:
    """The rules' verdict on a call of Parley's agent in the conversation's running turn
    (questions.rules.evaluate; one query for the rules): the deployment's rules, and those of
    the person who started the turn. Nobody's own rules count in a turn someone else started:
    in a shared conversation, a participant's request is judged by the participant's rules,
    whatever the owner chose. A sub-agent's call is judged as its parent's: by the rules of
    the person who started the parent's turn, and the parent conversation's rules. `default`:
    the effect when no rule matches."""
    conversation = Conversation.objects.filter(pk=conversation_id)
    started_by = conversation.values(by=Coalesce("parent__turn_started_by", "turn_started_by"))
    where = conversation.values(at=Coalesce("parent_id", "id"))
    return rules.evaluate(
        user=Subquery(started_by[:1]),
        conversation=Subquery(where[:1]),
        agent=PARLEY,
        server=server,
        tool=tool,
        arguments=arguments,
        default=default,
        spend=spend,
    )


@transaction.atomic
def decide(
    *,
    user,
    conversation_id: int,
    tool_call_id: str,
    decision: str,
    arguments: str | dict | None = None,
    feedback: str = "",
    via: Via = BROWSER,
    widen: bool = False,
) -> Question:
    """Decide a pending approval: allow (with `arguments` edited, as JSON text or an object,
    checked against the tool's input schema), always (allow, and keep the narrowest rule that
    allows this call again in the turns this user starts, in this conversation unless `widen`:
    questions.rules.allow_always; the block names the rule), or deny (with optional
    `feedback` for the model). The step goes on once its last approval is decided. Raises
    InvalidAnswer, NestedTooDeeply, QuestionAlreadyResolved, ConversationNotFound."""
    question = _pending_approval(
        user=user, conversation_id=conversation_id, tool_call_id=tool_call_id
    )
    request = question.approval
    if request.needed > 1:
        return _vote(
            question,
            user=user,
            decision=decision,
            feedback=feedback,
            via=via,
            edited=arguments not in (None, "") and arguments != request.arguments,
        )
    stored: dict[str, Any] = {"decision": decision}
    try:
        if decision in (ALLOW, ALWAYS):
            if isinstance(arguments, str) and arguments.strip():
                stored["arguments"] = parse_arguments(arguments, request.input_schema)
            elif isinstance(arguments, dict):
                stored["arguments"] = edited_arguments(arguments, request.input_schema)
            if stored.get("arguments") == request.arguments:
                del stored["arguments"]  # unchanged: not an edit
        elif decision == DENY:
            if text := cleaned_feedback(feedback):
                stored["feedback"] = text
        else:
            raise InvalidInput(APPROVALS_PENDING)
    except InvalidInput as error:
        raise InvalidAnswer(str(error)) from None
    if decision == ALWAYS:
        rule = rules.allow_always(
            user=user,
            conversation_id=question.conversation_id,
            agent=getattr(request, "agent", None) or PARLEY,
            server=request.server,
            tool=request.tool,
            arguments=stored.get("arguments", request.arguments),
            widen=widen,
        )
        if rule is not None:
            stored["rule"] = rules.Rule.of(rule).note(created=True).model_dump(mode="json")
    status = QuestionStatus.REJECTED if decision == DENY else QuestionStatus.ANSWERED
    with Transcript(question.conversation) as transcript:
        resolve(transcript, question, status=status, by=user, via=via, answers=stored)
        if decision == DENY and question.conversation.deny_stops_step:
            _deny_the_rest_of_the_step(transcript, question, user=user, via=via)
        resume_if_decided(transcript)
    return question


def cleaned_feedback(feedback: str) -> str:
    """A Deny's feedback as the model reads it, cleaned; InvalidInput when it is too long."""
    text = clean_text(feedback or "", multiline=True)
    if len(text) > MAX_FEEDBACK_CHARS:
        raise InvalidInput(FEEDBACK_TOO_LONG)
    return text


def _vote(question: Question, *, user, decision: str, feedback: str, via: Via, edited: bool):
    """One person's Allow or Deny of an approval that wants several people's (its rule's
    quorum): never the person who started the turn, only the rule's approvers (if it names
    any), once each; the last Allow it needs allows it, any Deny denies it at once. Each vote
    is kept (ApprovalVote)."""
    if decision == ALWAYS or edited:
        raise InvalidAnswer(str(ALLOWED_AS_ASKED))
    if decision not in (ALLOW, DENY):
        raise InvalidAnswer(str(APPROVALS_PENDING))
    conversation = question.conversation
    asked_by = question.approval.asked_by
    if decision == ALLOW:
        requester = conversation.turn_started_by_id
        if conversation.is_external:
            requester = conversation.owner_id  # the CLI's token is its user's
        if user.pk == requester:
            raise InvalidAnswer(str(NOT_YOUR_OWN))
        if asked_by.approvers and user.get_username() not in asked_by.approvers:
            raise InvalidAnswer(str(NOT_AN_APPROVER))
    if question.votes.filter(user=user).exists():
        raise InvalidAnswer(str(VOTED_ALREADY))
    try:
        text = cleaned_feedback(feedback)
    except InvalidInput as error:
        raise InvalidAnswer(str(error)) from None
    ApprovalVote.objects.create(question=question, user=user, decision=decision, via=via)
    allowed = list(question.votes.filter(decision=ALLOW).values_list("user__username", flat=True))
    with Transcript(conversation) as transcript:
        if decision == DENY:
            stored = {"decision": DENY, "votes": allowed, **({"feedback": text} if text else {})}
            resolve(
                transcript,
                question,
                status=QuestionStatus.REJECTED,
                by=user,
                via=via,
                answers=stored,
            )
            if conversation.deny_stops_step:
                _deny_the_rest_of_the_step(transcript, question, user=user, via=via)
        elif len(allowed) >= question.approval.needed:
            resolve(
                transcript,
                question,
                status=QuestionStatus.ANSWERED,
                by=user,
                via=via,
                answers={"decision": ALLOW, "votes": allowed},
            )
        else:
            # Still waiting: its card says who allowed it so far.
            Question.objects.filter(pk=question.pk).update(answers={"votes": allowed})
            question.answers = {"votes": allowed}
            write_block(transcript, question)
        resume_if_decided(transcript)
    return question


def _deny_the_rest_of_the_step(transcript: Transcript, denied: Question, *, user, via: Via) -> None:
    """Deny the step's other waiting calls with `denied`, naming it (a deny stops the step)."""
    stored = {"decision": DENY, "stoppedBy": denied.approval.title}
    if isinstance(denied.answers, dict) and denied.answers.get("feedback"):
        stored["feedback"] = denied.answers["feedback"]
    rest = (
        _step_approvals(denied)
        .filter(status=QuestionStatus.PENDING)
        .exclude(pk=denied.pk)
        .select_related("message")
        .select_for_update()
    )
    for question in sharing_messages(rest, known=[denied.message]):
        question.conversation = transcript.conversation
        resolve(
            transcript, question, status=QuestionStatus.REJECTED, by=user, via=via, answers=stored
        )


@transaction.atomic
def decide_all(
    *, user, conversation_id: int, calls: dict[str, str], decision: str, via: Via = BROWSER
) -> list[Question]:
    """Allow or deny every one of a step's waiting approvals at once ("Allow all N", "Deny
    all"): `calls` maps each call's id to the digest of the arguments the person saw
    (ApprovalPayload.arguments_digest). All or nothing: if any of them was decided meanwhile
    (QuestionAlreadyResolved), or is not what the person saw, or is not of the same step
    (InvalidAnswer), nothing is decided. Raises ConversationNotFound too."""
    if decision not in (ALLOW, DENY) or not calls:
        raise InvalidAnswer(str(APPROVALS_PENDING))
    questions = sharing_messages(
        _pending_approval(user=user, conversation_id=conversation_id, tool_call_id=call_id)
        for call_id in sorted(calls)
    )
    if len({q.message_id for q in questions}) != 1:
        raise InvalidAnswer(str(NOT_ONE_STEP))
    if decision == ALLOW and any(q.approval.needed > 1 for q in questions):
        raise InvalidAnswer(str(ONE_BY_ONE))
    for question in questions:
        if arguments_digest(question.approval.arguments) != calls[question.tool_call_id]:
            raise InvalidAnswer(str(CHANGED_SINCE_SEEN))
    status = QuestionStatus.REJECTED if decision == DENY else QuestionStatus.ANSWERED
    with Transcript(questions[0].conversation) as transcript:
        for question in questions:
            question.conversation = transcript.conversation
            resolve(
                transcript,
                question,
                status=status,
                by=user,
                via=via,
                answers={"decision": decision},
            )
        resume_if_decided(transcript)
    return questions


def deny_by_message(transcript: Transcript, reply, user) -> dispatch.Next | None:
    """The person sent a message while approvals wait: it denies them all, as their feedback
    (chat.engine.tools.resolve_pauses_by_message)."""
    text = reply_text(reply)
    return deny_all(transcript, user=user, via=AUTO_RESOLVE, feedback=text, reply=reply)


def deny_all(
    transcript: Transcript, *, user, via: Via, feedback: str = "", reply=None
) -> dispatch.Next | None:
    """Deny every pending approval of the conversation, in the caller's transaction and
    Transcript; the step goes on with each call denied. None if none was pending."""
    pending = sharing_messages(
        Question.objects.select_related("message").filter(
            conversation=transcript.conversation,
            kind=QuestionKind.TOOL_APPROVAL,
            status=QuestionStatus.PENDING,
        )
    )
    if not pending:
        return None
    stored = {"decision": DENY, **({"feedback": feedback} if feedback else {})}
    for question in pending:
        question.conversation = transcript.conversation
        resolve(
            transcript,
            question,
            status=QuestionStatus.REJECTED,
            by=user,
            via=via,
            answers=stored,
            answer_text=feedback,
            reply=reply,
        )
    return turns.resume_tools(transcript)


@transaction.atomic
def set_deny_stops_step(*, user, conversation_id: int, on: bool) -> None:
    """Turn the conversation's "a deny stops the step" on or off (a person who may act in it);
    its cards show the new state over the live channel. Raises ConversationNotFound,
    NotAllowed."""
    conversation = conversation_for_user(user=user, conversation_id=conversation_id, lock=True)
    if conversation.deny_stops_step == on:
        return
    conversation.deny_stops_step = on
    waiting = Question.objects.filter(
        conversation=conversation, kind=QuestionKind.TOOL_APPROVAL, status=QuestionStatus.PENDING
    ).values("message_id")
    with Transcript(conversation) as transcript:
        # The cards that show the switch, written again as they are: open pages show it.
        for message in Message.objects.filter(pk__in=waiting):
            transcript.update(message, blocks=parse_blocks(message.blocks))


def _pending_approval(*, user, conversation_id: int, tool_call_id: str) -> Question:
    question = question_for_user(
        user=user, conversation_id=conversation_id, tool_call_id=tool_call_id, lock=True
    )
    if question.kind != QuestionKind.TOOL_APPROVAL or not question.is_awaited:
        raise QuestionAlreadyResolved
    return question


# Why an agent outside Parley stopped waiting for an approval (the row's answers["ended"]).
ENDED_TERMINAL = "terminal"  # no decision in time: the agent asks in its own terminal
ENDED_CLOSED = "closed"  # the agent closed its request (answered there, or stopped)
ENDED_NOTICES = {
    ENDED_TERMINAL: gettext_noop("Asked in the terminal instead."),
    ENDED_CLOSED: gettext_noop("The agent stopped waiting: answered in its terminal, or stopped."),
}
ENDED_RESULT = "Not decided in Parley; the agent that asked stopped waiting."


@transaction.atomic
def end_unanswered(*, question_id: int, reason: str) -> bool:
    """The agent outside Parley that asked for this approval stopped waiting (`reason`:
    ENDED_TERMINAL or ENDED_CLOSED): a still pending approval ends cancelled, can no longer be
    answered, and says why; its conversation's turn ends. False if it was decided first."""
    question = (
        Question.objects.select_related("message", "conversation")
        .filter(pk=question_id, status=QuestionStatus.PENDING)
        .select_for_update(of=("conversation",))
        .first()
    )
    if question is None:
        return False
    with Transcript(question.conversation) as transcript:
        resolve(
            transcript,
            question,
            status=QuestionStatus.CANCELLED,
            by=None,
            via="",
            answers={"ended": reason},
        )
        if question.conversation.agent_state == AgentState.AWAITING_USER:
            turns.decline(
                transcript,
                result=ToolResultBlock.error(question.tool_call_id, ENDED_RESULT).model_copy(
                    update={"shown_elsewhere": True}
                ),
                unrun_result=ENDED_RESULT,
                notice=ENDED_NOTICES[reason],
            )
    return True


# --- Edited arguments --------------------------------------------------------------------------


def parse_arguments(text: str, schema: dict) -> dict:
    """Edited arguments, as typed: a JSON object valid against the tool's input schema.
    Raises InvalidInput saying what is wrong, NestedTooDeeply past MAX_ARGUMENTS_DEPTH."""
    if len(text) > MAX_ARGUMENTS_CHARS:
        raise InvalidInput(ARGUMENTS_TOO_LONG)
    if text_nesting_depth(text) > MAX_ARGUMENTS_DEPTH:
        raise NestedTooDeeply(ARGUMENTS_TOO_DEEP % {"limit": MAX_ARGUMENTS_DEPTH})
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InvalidInput(BAD_JSON % {"error": error}) from None
    if not isinstance(value, dict):
        raise InvalidInput(NOT_AN_OBJECT)
    return edited_arguments(value, schema)


def edited_arguments(value: dict, schema: dict) -> dict:
    """Edited arguments given as an object, as Parley keeps them (storable), checked as
    parse_arguments checks them."""
    if nesting_depth(value, limit=MAX_ARGUMENTS_DEPTH) > MAX_ARGUMENTS_DEPTH:
        raise NestedTooDeeply(ARGUMENTS_TOO_DEEP % {"limit": MAX_ARGUMENTS_DEPTH})
    value = storable(value)
    check_arguments(value, schema)
    return value


def check_arguments(value: dict, schema: dict) -> None:
    """Raises InvalidInput when `value` does not fit `schema` or cannot be checked against it
    in bounded time (questions.tool_input); a broken schema checks nothing."""
    try:
        error = schema_error(value, schema)
    except UncheckablePattern as refused:
        raise InvalidInput(PATTERN_UNCHECKABLE % {"pattern": clip(refused.pattern, 200)}) from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise InvalidInput(
            SCHEMA_MISMATCH % {"error": f"{where}: {error.message}" if where else error.message}
        )
