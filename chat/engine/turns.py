"""The agent turn state machine: the only writer of a conversation's agent state and lease.

    idle/error --begin_turn--> llm_requesting --complete_step--> tool_executing or idle
    tool_executing --tools_done--> llm_requesting
    tool_executing --pause--> awaiting_user --resume--> llm_requesting or tool_executing
        (calls left after the pausing one)      awaiting_user --decline--> idle
    awaiting_user --resume_tools--> tool_executing (the calls' approvals are all decided)
    any running state --fail--> error      any running state --stop_turn--> idle

Every transition commits before its effect runs: the step counter before the model request,
`tool_executing` before the tools run, each tool result before the next tool. A runner holds
a lease on the conversation; each of its writes presents the lease's fencing token, so a
runner whose lease was taken over (it stalled, or the user pressed Stop) can no longer write.

Transitions that start or end a turn return what should happen once they commit
(dispatch.Next); the caller hands it to dispatch.on_commit. Nothing here starts a runner.
When this process runs its turns itself (dispatch.claims_here: one process, no queue), a
transition that starts a turn also claims it for this process's runner, in the same
transaction, as `claim` would (Next.claimed): the model request goes out as that commits,
without a claim transaction of its own queued behind the pages that render the very change.
Should the process die first, the lease lapses and a sweep runs the turn, as for a runner
that died mid-turn.

In the conversation of an agent outside Parley (an MCP client: Conversation.agent external)
no model runs: its pausing call comes in through begin_external_call, and an answer ends the
turn (resume) instead of asking the model again.

A sub-agent's turn is an ordinary turn of a child conversation; its parent waits in
tool_executing, and stopping or failing the parent stops the running children.
"""

import os
import re
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from chat import limits
from chat.blocks import (
    ActionBlock,
    ErrorBlock,
    NoticeBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    parse_blocks,
)
from chat.engine import dispatch
from chat.engine.dispatch import NOTHING, Next
from chat.errors import AgentBusy, NoAgentHere
from chat.models import RUNNING_STATES, AgentState, Conversation, Message, Role
from chat.selectors import (
    SUBAGENT_STOPPED,
    assistant_newest_first,
    last_turn_newest_first,
    people_ids,
)
from chat.transcript import Transcript, draft_text, lock
from core import events

# Stored as English msgids and translated when rendered, so each reader sees their language.
AGENT_FAILED = gettext_noop("The agent could not finish its reply. Nothing was lost; try again.")
STEP_LIMIT = gettext_noop(
    "The agent stopped after too many steps in one turn. Send a message to continue."
)
CONTEXT_OVERFLOW = gettext_noop(
    "Your message is too long for the model's context window: shorten it, or split it over "
    "several messages."
)
STOPPED = gettext_noop("Stopped")
# What the model reads for calls that never ran.
STOPPED_RESULT = "The user stopped the agent before this tool ran."
# An external agent's call once decided: the agent runs it (or not) where it runs.
DECIDED_ELSEWHERE_RESULT = "Decided; the agent that asked runs the call itself."
MISSING_RESULT = "No result was recorded for this tool call."

TOOL_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

# This process's name as a lease owner.
RUNNER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaseLost(Exception):
    """The runner's lease was taken over or revoked; it must stop without writing."""


@dataclass(frozen=True)
class Lease:
    conversation_id: int
    token: int
    owner: str = RUNNER_ID


@dataclass(frozen=True)
class Draft:
    """The draft message a step's reply streams into, and its text as stored (None when it
    is not plain text): what a runner knows of it without reading it again."""

    message_id: int
    text: str | None


@dataclass(frozen=True)
class TurnState:
    state: AgentState
    steps: int
    # The calls left to run, when the transition that returned this state stored them
    # (complete_step): the runner runs them without reading them again.
    tool_calls: tuple[ToolCallBlock, ...] | None = None


@dataclass(frozen=True)
class Claim:
    lease: Lease
    # The runner whose lease had lapsed when this one claimed the turn ("" if none held it).
    taken_from: str
    # The turn is a sub-agent's: it may not ask the user or spawn agents.
    is_subagent: bool
    turn: TurnState
    # The claim also started the turn's next model request (`step_limit`), with this draft.
    draft: Draft | None = None


@dataclass(frozen=True)
class Paused:
    """A pause that began: the conversation (locked) and the message whose call paused."""

    conversation: Conversation
    message: Message


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.PARLEY_LEASE_SECONDS)


def queued_lease_expiry() -> datetime | None:
    """The lease of a turn sent to the workers' queue, before any runner claims it: it has no
    owner, so any runner may claim it, and it lapses a lease period later, when the sweeps
    take the turn for lost (a worker that took it from the queue and died). Without it, every
    sweep of every process would send each turn still in the queue again. None when there is
    no queue (no Redis): a sweep may then take the turn at once."""
    return timezone.now() + lease_duration() if settings.REDIS_URL else None


# --- Transitions started by people (the caller holds the row lock) --------------------------


def begin_turn(transcript: Transcript, *, by, retrying: bool = False) -> Next:
    """idle/error -> llm_requesting, a turn started `by` a person (also from a pause nothing
    waits on any more: the model reads its open call as having no result). A retry takes the
    failed attempt's place: its error card goes, and a new one comes only if it fails again.
    Raises NoAgentHere in a conversation of an agent outside Parley, where no model runs."""
    conversation = transcript.conversation
    if conversation.is_external:
        raise NoAgentHere
    _retire_retry(transcript, superseded=retrying)
    was_waiting = conversation.agent_state == AgentState.AWAITING_USER
    conversation.turn_started_by = by
    conversation.turn_steps = 0
    conversation.turn_pauses = 0
    next = _set_running(transcript, AgentState.LLM_REQUESTING)
    if was_waiting:
        attention_changed(conversation)
    return next


def stop_turn(transcript: Transcript) -> Next:
    """End a running turn now, keeping the text so far; fences out its runner. Running
    sub-agents it started are stopped with it."""
    _finalize_draft(transcript)
    _close_open_tool_calls(transcript, STOPPED_RESULT)
    transcript.append(role=Role.SYSTEM, blocks=[NoticeBlock(message=STOPPED)])
    conversation = transcript.conversation
    conversation.lease_token += 1
    _end(transcript, AgentState.IDLE)
    return Next(cancel=(conversation.pk,)) | _stop_subagents(conversation)


def resume(
    transcript: Transcript, *, result: ToolResultBlock, asked_in: Message | None = None
) -> Next:
    """Store the pausing call's one result and carry on: the calls left after it first, then
    the model. The caller holds the row lock and has checked the pause is still open.
    `asked_in`: the message that made the pausing call, if the caller has it (the calls left
    are then read from it, with no query).

    In a conversation of an agent outside Parley the turn ends there (idle): that agent reads
    the result itself (begin_external_call)."""
    transcript.append(role=Role.TOOL, blocks=[result])
    if transcript.conversation.is_external:
        _end(transcript, AgentState.IDLE)
        attention_changed(transcript.conversation)
        return NOTHING
    # The user is back in the loop: the step budget starts again (the pause budget not).
    transcript.conversation.turn_steps = 0
    calls_left = _calls_after(asked_in, result.tool_call_id)
    if calls_left is None:
        calls_left = bool(open_tool_calls(transcript.conversation))
    state = AgentState.TOOL_EXECUTING if calls_left else AgentState.LLM_REQUESTING
    next = _set_running(transcript, state)
    attention_changed(transcript.conversation)
    return next


def resume_tools(transcript: Transcript) -> Next:
    """Every decision the pause waited for is made (the tools' approvals): run the open calls,
    which read their decisions. The caller holds the row lock and has checked the pause is
    still open.

    In a conversation of an agent outside Parley (a CLI's permission hook) the turn ends
    there (idle): that agent reads the decision and runs the call itself, or not."""
    if transcript.conversation.is_external:
        _close_open_tool_calls(transcript, DECIDED_ELSEWHERE_RESULT)
        _end(transcript, AgentState.IDLE)
        attention_changed(transcript.conversation)
        return NOTHING
    transcript.conversation.turn_steps = 0
    next = _set_running(transcript, AgentState.TOOL_EXECUTING)
    attention_changed(transcript.conversation)
    return next


def decline(
    transcript: Transcript, *, result: ToolResultBlock, unrun_result: str, notice: str
) -> None:
    """Store the pausing call's one result and end the turn (idle); calls left after it get
    `unrun_result`, and the user reads `notice` (an English msgid) saying what happened and
    what to do next. The caller holds the row lock and has checked the pause is still open."""
    transcript.append(role=Role.TOOL, blocks=[result])
    _close_open_tool_calls(transcript, unrun_result)
    transcript.append(role=Role.SYSTEM, blocks=[NoticeBlock(message=notice)])
    _end(transcript, AgentState.IDLE)
    attention_changed(transcript.conversation)


def begin_external_call(
    transcript: Transcript, *, name: str, arguments: dict
) -> tuple[Lease, ToolCallBlock]:
    """An agent outside Parley (an MCP client) calls the pausing tool `name` in its
    conversation, where no model runs: the call is stored as that agent's message and the turn
    moves to tool_executing, its lease taken for the caller, who pauses it in this same
    transaction (questions.asking.ask) — so no runner or sweep ever sees it running. Returns
    that lease and the stored call. The caller holds the row lock; raises AgentBusy unless the
    conversation is an external agent's and neither runs nor waits for the user."""
    conversation = transcript.conversation
    if not conversation.is_external or conversation.agent_state not in (
        AgentState.IDLE,
        AgentState.ERROR,
    ):
        raise AgentBusy
    conversation.turn_steps = 0
    conversation.turn_pauses = 0
    call = ToolCallBlock(id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=arguments)
    transcript.append(role=Role.ASSISTANT, blocks=[call])
    conversation.agent_state = AgentState.TOOL_EXECUTING
    claim = _take_lease(transcript, step_limit=None)
    return claim.lease, call


# --- The runner's side -------------------------------------------------------------------------


def claim(conversation_id: int, *, step_limit: int | None = None) -> Claim | None:
    """Take the lease of a running turn that nobody holds (or whose holder stopped renewing).
    With `step_limit`, a turn whose next step is a model request also has that request
    started here (as begin_step does), unless it already made `step_limit` of them. The
    caller is in a transaction."""
    conversation = (
        Conversation.objects.select_for_update(of=("self",))
        .filter(
            Q(lease_owner="")
            | Q(lease_expires_at__isnull=True)
            | Q(lease_expires_at__lt=timezone.now()),
            pk=conversation_id,
            agent_state__in=RUNNING_STATES,
        )
        .first()
    )
    if conversation is None:
        return None
    with Transcript(conversation) as transcript:
        return _take_lease(transcript, step_limit=step_limit)


@transaction.atomic
def renew(lease: Lease) -> None:
    _keep_lease(_held(lease))


@transaction.atomic
def release(lease: Lease) -> None:
    """Give the lease back (the runner is shutting down, or failed; a turn that pauses or
    ends gives it back in that very change)."""
    try:
        _held(lease)
    except LeaseLost:
        return
    Conversation.objects.filter(pk=lease.conversation_id).update(
        lease_owner="", lease_expires_at=None
    )


@transaction.atomic
def current(lease: Lease) -> TurnState:
    conversation = _held(lease)
    _keep_lease(conversation)
    return TurnState(AgentState(conversation.agent_state), conversation.turn_steps)


@transaction.atomic
def begin_step(lease: Lease, *, limit: int | None = None) -> Draft | None:
    """Count a model request before it is sent, and open the draft its reply streams into.
    Returns that draft, or None (and counts nothing) when the turn already made `limit`
    requests."""
    conversation = _held(lease, AgentState.LLM_REQUESTING)
    if limit is not None and conversation.turn_steps >= limit:
        _keep_lease(conversation)
        return None
    conversation.turn_steps += 1
    with Transcript(conversation) as transcript:
        return _open_draft(transcript)


@transaction.atomic
def stream_text(lease: Lease, text: str) -> Draft:
    """The model's text so far, shown in the turn's draft message; returns that draft."""
    conversation = _held(lease, AgentState.LLM_REQUESTING)
    with Transcript(conversation) as transcript:
        draft = _draft(transcript)
        if draft is None:
            draft = transcript.append(
                role=Role.ASSISTANT, blocks=[TextBlock(text=text)], is_draft=True
            )
        else:
            transcript.stream_into_draft(draft, text)
    return Draft(draft.pk, text)


@transaction.atomic
def complete_step(lease: Lease, *, text: str, tool_calls: list[ToolCallBlock]) -> TurnState:
    """Store the model's whole answer; then run its tools, or end the turn. Returns the turn's
    state after it, which the runner goes on from without reading it again."""
    conversation = _held(lease, AgentState.LLM_REQUESTING)
    tool_calls = _with_unique_ids(conversation, tool_calls)
    blocks = ([TextBlock(text=text)] if text else []) + list(tool_calls)
    with Transcript(conversation) as transcript:
        draft = _draft(transcript)
        if draft is not None:
            # Even when empty: open tabs show the draft, so it is kept (and hidden) rather than
            # deleted, which the catch-up protocol could not express.
            transcript.update(draft, blocks=blocks)
        elif blocks:
            transcript.append(role=Role.ASSISTANT, blocks=blocks)
        if tool_calls:
            conversation.agent_state = AgentState.TOOL_EXECUTING
            transcript.touch()
        else:
            _end(transcript, AgentState.IDLE)
    return TurnState(
        AgentState(conversation.agent_state),
        conversation.turn_steps,
        tuple(tool_calls) if tool_calls else None,
    )


@transaction.atomic
def pending_tool_calls(lease: Lease) -> list[ToolCallBlock]:
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    _keep_lease(conversation)
    return open_tool_calls(conversation)


@transaction.atomic
def record_tool_result(lease: Lease, result: ToolResultBlock) -> None:
    """Store one tool result, exactly once per tool call."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    if result.tool_call_id not in {call.id for call in open_tool_calls(conversation)}:
        _keep_lease(conversation)
        return
    with Transcript(conversation) as transcript:
        transcript.append(role=Role.TOOL, blocks=[result])


@transaction.atomic
def tools_done(lease: Lease) -> TurnState:
    """The tools ran: the model is asked again. Returns the turn's state after it."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    with Transcript(conversation) as transcript:
        _close_open_tool_calls(transcript, MISSING_RESULT)
        conversation.agent_state = AgentState.LLM_REQUESTING
        transcript.touch()
    return TurnState(AgentState(conversation.agent_state), conversation.turn_steps)


@transaction.atomic
def fail(
    lease: Lease, message: str = AGENT_FAILED, *, retryable: bool = True, detail: str = ""
) -> Next:
    """End the turn in the error state with an error block; keeps everything written so far.
    Only a running turn can fail: one that already paused or ended is left as it is."""
    conversation = _held(lease, *RUNNING_STATES)
    with Transcript(conversation) as transcript:
        _finalize_draft(transcript)
        _close_open_tool_calls(transcript, MISSING_RESULT)
        transcript.append(
            role=Role.SYSTEM,
            blocks=[ErrorBlock(message=message, detail=detail, retryable=retryable)],
        )
        _end(transcript, AgentState.ERROR)
    return _stop_subagents(conversation)


@transaction.atomic
def spawn_subagents(lease: Lease, call: ToolCallBlock, tasks: list[tuple[str, str]]) -> Next:
    """Start one sub-agent turn per (title, task) for `call`, each in a child conversation
    whose first user message is the task; idempotent, so a runner that takes the parent's
    turn over finds the children its predecessor made and starts none twice. Raises
    TooManySubagents (chat.limits), starting none, past the owner's cap."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    if conversation.children.filter(parent_tool_call_id=call.id).exists():
        _keep_lease(conversation)
        return NOTHING
    limits.check_subagent_slots(owner_id=conversation.owner_id, wanted=len(tasks))
    started = NOTHING
    for index, (title, task) in enumerate(tasks):
        child = Conversation.objects.create(
            owner_id=conversation.owner_id,
            title=title,
            parent=conversation,
            parent_tool_call_id=call.id,
            subagent_index=index,
        )
        with Transcript(child) as transcript:
            transcript.append(role=Role.USER, blocks=[TextBlock(text=task)])
            started |= _set_running(transcript, AgentState.LLM_REQUESTING)
    # The call's message changes (it now shows the children), so open pages render them.
    conversation.has_subagents = True
    with Transcript(conversation) as transcript:
        message = _message_with_call(conversation, call.id)
        transcript.update(message, blocks=parse_blocks(message.blocks))
    return started


@transaction.atomic
def refuse_tool_calls(
    lease: Lease, calls: list[ToolCallBlock], *, result: str, error: str, detail: str = ""
) -> None:
    """Give each call an error result for the model, and show the user one error card saying
    why (`error`, with `detail` in plain words); the turn goes on."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    open_ids = {call.id for call in open_tool_calls(conversation)}
    with Transcript(conversation) as transcript:
        for call in calls:
            if call.id in open_ids:
                refused = ToolResultBlock.error(call.id, result)
                transcript.append(
                    role=Role.TOOL, blocks=[refused.model_copy(update={"shown_elsewhere": True})]
                )
        transcript.append(role=Role.SYSTEM, blocks=[ErrorBlock(message=error, detail=detail)])


def pause(
    lease: Lease, call: ToolCallBlock, *actions: ActionBlock, limit: int | None = None
) -> Paused | None:
    """Show `actions` under the message that made `call` (the calls they are about are all
    in it) and wait for the user: tool_executing -> awaiting_user. None (nothing changes) if
    the turn already paused `limit` times. In the caller's transaction, which records what the
    pause is for (questions.asking.ask, questions.asking.ask_approvals)."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    if limit is not None and conversation.turn_pauses >= limit:
        _keep_lease(conversation)
        return None
    message = _message_with_call(conversation, call.id)
    conversation.turn_pauses += 1
    conversation.agent_state = AgentState.AWAITING_USER
    _free_lease(conversation)
    with Transcript(conversation) as transcript:
        transcript.update(message, blocks=[*parse_blocks(message.blocks), *actions])
    attention_changed(conversation)
    return Paused(conversation, message)


def show_action(
    lease: Lease, call: ToolCallBlock, action: ActionBlock, *, waiting: bool = True
) -> Message:
    """Show `action` under the message that made the running `call` without pausing the turn
    (a running tool asks the user something and waits itself; or `waiting=False`, a record
    that asks nothing); returns that message. In the caller's transaction."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    _keep_lease(conversation)
    message = _message_with_call(conversation, call.id)
    with Transcript(conversation) as transcript:
        transcript.update(message, blocks=[*parse_blocks(message.blocks), action])
    if waiting:
        attention_changed(conversation, waiting=True)
    return message


def show_in_parent(lease: Lease, action: ActionBlock) -> tuple[Conversation, Message]:
    """Show `action` of a running sub-agent (an approval its call waits for) in the parent's
    transcript, under the message of the call that started the sub-agent; nothing pauses.
    Returns the parent (locked) and that message. Locks the parent before the child, the only
    order in which both are ever locked. In the caller's transaction."""
    parent_id, call_id = (
        Conversation.objects.filter(pk=lease.conversation_id, parent__isnull=False)
        .values_list("parent_id", "parent_tool_call_id")
        .first()
    ) or (None, None)
    if parent_id is None:
        raise LeaseLost
    parent = lock(parent_id)
    _keep_lease(_held(lease, AgentState.TOOL_EXECUTING))
    message = _message_with_call(parent, call_id)
    with Transcript(parent) as transcript:
        transcript.update(message, blocks=[*parse_blocks(message.blocks), action])
    attention_changed(parent, waiting=True)
    return parent, message


def stale_runs() -> list[int]:
    """Running turns that no runner holds: never claimed (when queued for the workers: not
    within a lease period, queued_lease_expiry), or the holder stopped renewing."""
    return list(
        Conversation.objects.filter(
            Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now()),
            agent_state__in=RUNNING_STATES,
        ).values_list("pk", flat=True)
    )


def open_tool_calls(conversation: Conversation) -> list[ToolCallBlock]:
    """Tool calls of the transcript that have no result yet, in order: read back to the start
    of the last turn, as every way a turn ends gives each of its calls a result (tools_done,
    stop_turn, fail, decline; complete_step ends a turn only with a step that made none)."""
    calls: list[ToolCallBlock] = []  # newest first
    answered: set[str] = set()
    for message, _ in last_turn_newest_first(conversation.pk):
        if message.is_draft:
            continue
        for block in reversed(parse_blocks(message.blocks)):
            if isinstance(block, ToolResultBlock):
                answered.add(block.tool_call_id)
            elif isinstance(block, ToolCallBlock) and block.id not in answered:
                calls.append(block)
    return calls[::-1]


# --- Helpers (the caller holds the row lock) --------------------------------------------------


def _calls_after(message: Message | None, call_id: str) -> bool | None:
    """Whether `message` has calls after the pausing `call_id`: those are the calls left, as
    a step's calls run in order and the pausing one stops the rest. None if it cannot say."""
    if message is None:
        return None
    ids = [b.id for b in parse_blocks(message.blocks) if isinstance(b, ToolCallBlock)]
    if call_id not in ids:
        return None
    return ids.index(call_id) < len(ids) - 1


def _set_running(transcript: Transcript, state: AgentState) -> Next:
    """Put the turn in the running `state`: claimed for this process's runner now when it
    runs its turns itself, else for any runner to claim once this commits."""
    conversation = transcript.conversation
    conversation.agent_state = state
    transcript.touch()
    if dispatch.claims_here():
        claim = _take_lease(transcript, step_limit=settings.AGENT_MAX_STEPS)
        return Next(run=(conversation.pk,), claimed=(claim,))
    conversation.lease_owner = ""
    conversation.lease_expires_at = queued_lease_expiry()
    return Next(run=(conversation.pk,))


def _take_lease(transcript: Transcript, *, step_limit: int | None) -> Claim:
    """Give the running turn's lease to this process's runner (a new fencing token). With
    `step_limit`, a turn whose next step is a model request also has that request started
    (as begin_step does), unless it already made `step_limit` of them."""
    conversation = transcript.conversation
    taken_from = conversation.lease_owner
    conversation.lease_owner = RUNNER_ID
    conversation.lease_expires_at = timezone.now() + lease_duration()
    conversation.lease_token += 1
    draft = None
    if (
        step_limit is not None
        and conversation.agent_state == AgentState.LLM_REQUESTING
        and conversation.turn_steps < step_limit
    ):
        conversation.turn_steps += 1
        draft = _open_draft(transcript)
    return Claim(
        Lease(conversation.pk, conversation.lease_token),
        taken_from,
        is_subagent=conversation.parent_id is not None,
        turn=TurnState(AgentState(conversation.agent_state), conversation.turn_steps),
        draft=draft,
    )


def _held(lease: Lease, *states: AgentState) -> Conversation:
    """Lock the conversation, check the lease is still this runner's, and extend it: a change
    saves the extension with the row; a caller that changes nothing saves it (_keep_lease)."""
    conversation = lock(lease.conversation_id)
    if conversation.lease_token != lease.token or conversation.lease_owner != lease.owner:
        raise LeaseLost
    if states and conversation.agent_state not in states:
        raise LeaseLost
    conversation.lease_expires_at = timezone.now() + lease_duration()
    return conversation


def _keep_lease(conversation: Conversation) -> None:
    """Save the lease's extension (_held) where no change saves the row with it."""
    Conversation.objects.filter(pk=conversation.pk).update(
        lease_expires_at=conversation.lease_expires_at
    )


def _end(transcript: Transcript, state: AgentState) -> None:
    """Leave the running states, giving the lease back in that same change: the runner sees
    the state it left and stops, with nothing more to write."""
    transcript.conversation.agent_state = state
    _free_lease(transcript.conversation)
    transcript.touch()


def _free_lease(conversation: Conversation) -> None:
    conversation.lease_owner = ""
    conversation.lease_expires_at = None


def attention_changed(conversation: Conversation, *, waiting: bool | None = None) -> None:
    """Something began or stopped waiting for the people of the conversation (a pause; a
    running tool's request): the pages of its owner and members recount what waits for
    them."""
    if waiting is None:
        waiting = conversation.agent_state == AgentState.AWAITING_USER
    # A conversation read for a person knows whether it is shared (no query when it is not).
    shared = getattr(conversation, "shared", True)
    for user_id in people_ids(conversation.pk) if shared else [conversation.owner_id]:
        events.send_on_commit(
            events.attention_group(user_id),
            events.attention_changed(user_id, conversation.pk, waiting=waiting),
        )


def _stop_subagents(conversation: Conversation) -> Next:
    """Stop the running sub-agents of a turn that ended. Locks parent before child, the only
    order in which both are ever locked."""
    stopped = []
    running = conversation.children.filter(agent_state__in=RUNNING_STATES)
    for child_id in running.values_list("pk", flat=True):
        child = lock(child_id)
        if not child.is_running:
            continue
        child.lease_token += 1
        with Transcript(child) as transcript:
            _finalize_draft(transcript)
            _close_open_tool_calls(transcript, STOPPED_RESULT)
            transcript.append(role=Role.SYSTEM, blocks=[ErrorBlock(message=SUBAGENT_STOPPED)])
            _end(transcript, AgentState.ERROR)
        stopped.append(child.pk)
    return Next(cancel=tuple(stopped))


def _open_draft(transcript: Transcript) -> Draft:
    """The draft the step's reply streams into, made (empty) as the step starts: open pages
    render it while the model request is on its way (an empty draft is not shown), so the
    first text reaches them as a plain append. The step's start is a change either way."""
    draft = _draft(transcript)
    if draft is None:
        draft = transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text="")], is_draft=True)
    else:
        transcript.touch()
    return Draft(draft.pk, draft_text(draft))


def _draft(transcript: Transcript) -> Message | None:
    """The turn's streaming draft, if it has one: while it does, the draft is the newest
    message (nothing else is appended while a model request streams, and every way a step
    ends turns it into a message first)."""
    newest = transcript.newest()
    return newest if newest is not None and newest.is_draft else None


def _finalize_draft(transcript: Transcript) -> None:
    """Keep what the turn's draft shows, as a message that is no longer a draft. A draft that
    never got any text is kept too, empty and hidden, as complete_step keeps one: open tabs
    have it, and a deletion is not a change they would see."""
    draft = _draft(transcript)
    if draft is None:
        return
    blocks = [b for b in parse_blocks(draft.blocks) if not isinstance(b, TextBlock) or b.text]
    transcript.update(draft, blocks=blocks)


def _retire_retry(transcript: Transcript, *, superseded: bool = False) -> None:
    """A new turn makes earlier Retry buttons meaningless: take them off every open tab (and,
    for a retry, the failure it retries). Only the last turn can hold one: each new turn
    retires those before it."""
    update = {"retryable": False, **({"superseded": True} if superseded else {})}
    # The turn before the messages this edit appended (the new turn's prompt, when a message
    # starts it).
    turn = last_turn_newest_first(transcript.conversation.pk, before=transcript.first_appended)
    for message, _ in turn:
        if message.role != Role.SYSTEM:
            continue
        blocks = parse_blocks(message.blocks)
        if any(isinstance(b, ErrorBlock) and b.retryable for b in blocks):
            retired = [
                b.model_copy(update=update) if isinstance(b, ErrorBlock) and b.retryable else b
                for b in blocks
            ]
            transcript.update(message, blocks=retired)


def _with_unique_ids(conversation: Conversation, calls: list[ToolCallBlock]) -> list[ToolCallBlock]:
    """Tool-call ids must be unique in the transcript and safe in URLs; providers do not
    always ensure that (a missing id, one reused across steps), so such ids are replaced."""
    if not calls:
        return calls
    # Every call of the transcript, superseded ones too, from the stored JSON alone.
    stored = Message.objects.filter(conversation=conversation, role=Role.ASSISTANT)
    used = {
        block.get("id")
        for blocks in stored.values_list("blocks", flat=True)
        for block in (blocks if isinstance(blocks, list) else ())
        if isinstance(block, dict) and block.get("type") == "tool_call"
    }
    unique = []
    for call in calls:
        if not TOOL_CALL_ID.fullmatch(call.id) or call.id in used:
            call = call.model_copy(update={"id": f"call_{uuid.uuid4().hex[:24]}"})
        used.add(call.id)
        unique.append(call)
    return unique


def _message_with_call(conversation: Conversation, call_id: str) -> Message:
    for message in assistant_newest_first(conversation.pk):
        if any(
            isinstance(b, ToolCallBlock) and b.id == call_id for b in parse_blocks(message.blocks)
        ):
            return message
    raise LeaseLost  # the call is gone: the transcript changed under this runner


def _close_open_tool_calls(transcript: Transcript, content: str) -> None:
    for call in open_tool_calls(transcript.conversation):
        transcript.append(role=Role.TOOL, blocks=[ToolResultBlock.error(call.id, content)])
