"""The agent turn state machine: the only writer of a conversation's agent state and lease.

    idle/error --begin_turn--> llm_requesting --complete_step--> tool_executing or idle
    tool_executing --tools_done--> llm_requesting
    tool_executing --pause--> awaiting_user --resume--> llm_requesting or tool_executing
        (calls left after the pausing one)      awaiting_user --decline--> idle
    any running state --fail--> error      any running state --stop_turn--> idle

Every transition commits before its effect runs: the step counter before the model request,
`tool_executing` before the tools run, each tool result before the next tool. A runner holds a
lease on the conversation; each of its writes presents the lease's fencing token, so a runner
whose lease was taken over (it stalled, or the user pressed Stop) can no longer write.

A sub-agent's turn (chat.subagents) is an ordinary turn of a child conversation; its parent
waits in tool_executing, and stopping or failing the parent stops the running children.
"""

import dataclasses
import os
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from chat import events, runner, transcript
from chat.blocks import (
    ActionBlock,
    ErrorBlock,
    NoticeBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    parse_blocks,
)
from chat.compiled import CompiledQuery, save_fields
from chat.models import RUNNING_STATES, AgentState, Conversation, Message, Role
from chat.selectors import assistant_newest_first, last_turn_newest_first

# Stored as English msgids and translated when rendered, so each reader sees their language.
AGENT_FAILED = gettext_noop("The agent could not finish its reply. Nothing was lost; try again.")
STEP_LIMIT = gettext_noop(
    "The agent stopped after too many steps in one turn. Send a message to continue."
)
STOPPED_RESULT = "The user stopped the agent before this tool ran."
SUBAGENT_STOPPED = gettext_noop("Stopped together with the agent that started it.")
STOPPED = gettext_noop("Stopped")
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
class Claim:
    lease: Lease
    # The runner whose lease had lapsed when this one claimed the turn ("" if none held it).
    taken_from: str
    # The turn is a sub-agent's (chat.subagents): it may not ask the user or spawn agents.
    is_subagent: bool = False
    # The turn's state when it was claimed, so the runner starts without reading it again.
    turn: "TurnState | None" = None
    # The claim also counted the turn's next model request (claim's `step_limit`).
    step_started: bool = False
    # That request's history (chat.runtime.HistoryMessage list), read in the claim's
    # transaction (chat.runtime.with_history), so the runner sends it without a read first.
    history: list | None = None
    # And the draft its reply streams into.
    draft: Draft | None = None


@dataclass(frozen=True)
class TurnState:
    state: AgentState
    steps: int
    # The calls left to run, when the change that returned this state stored them
    # (complete_step): the runner runs them without reading them again (chat.runtime.run_tools).
    tool_calls: tuple[ToolCallBlock, ...] | None = None


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.PARLEY_LEASE_SECONDS)


def queued_lease_expiry() -> datetime | None:
    """The lease of a turn sent to the workers' queue, before any runner claims it: it has no
    owner, so any runner may claim it (claim), and it lapses a lease period later, when the
    sweeps take the turn for lost (a worker that took it from the queue and died). With no
    lease at all, every sweep of every process sent each turn still waiting in the queue again
    (under 30 concurrent flows, nearly one claim that found it taken for every turn). None when
    no queue is involved (no Redis): a sweep then takes the turn at once."""
    return timezone.now() + lease_duration() if settings.REDIS_URL else None


# --- Transitions started by people (the caller holds the row lock) --------------------------


def begin_turn(conversation: Conversation, *, retrying: bool = False) -> None:
    """idle/error -> llm_requesting, with a runner after commit (`_set_running`). A retry takes
    the failed attempt's place: its error card goes, and a new one comes only if it fails
    again."""
    _retire_retry(conversation, superseded=retrying)
    conversation.turn_steps = 0
    conversation.turn_pauses = 0
    _set_running(conversation, AgentState.LLM_REQUESTING)


def stop_turn(conversation: Conversation) -> None:
    """End a running turn now, keeping the text so far; fences out its runner. Running
    sub-agents it started are stopped with it."""
    _finalize_draft(conversation)
    _close_open_tool_calls(conversation, STOPPED_RESULT)
    transcript.append_message(conversation, role=Role.SYSTEM, blocks=[NoticeBlock(message=STOPPED)])
    conversation.lease_token += 1
    _end(conversation, AgentState.IDLE)
    runner.cancel_local_on_commit(conversation.pk)
    _stop_subagents(conversation)


# --- The runner's side -------------------------------------------------------------------------


@transaction.atomic(savepoint=False)
def claim(conversation_id: int, *, step_limit: int | None = None) -> Claim | None:
    """Take the lease of a running turn that nobody holds (or whose holder stopped renewing).
    With `step_limit`, a turn whose next step is a model request also has that request
    counted here (as begin_step does), unless it already made `step_limit` of them."""
    claimable = Conversation.objects.filter(
        Q(lease_owner="")
        | Q(lease_expires_at__isnull=True)
        | Q(lease_expires_at__lt=timezone.now()),
        pk=conversation_id,
        agent_state__in=RUNNING_STATES,
    ).select_for_update(of=("self",))
    conversation = claimable.first()
    if conversation is None:
        return None
    claim = _take_lease(conversation, step_limit=step_limit)
    save_lease = partial(save_fields, conversation, _LEASE_FIELDS)
    if not claim.step_started:
        save_lease()
        return claim
    return dataclasses.replace(claim, draft=_open_draft(conversation, save=save_lease))


@transaction.atomic
def renew(lease: Lease) -> None:
    _held(lease)


@transaction.atomic
def release(lease: Lease) -> None:
    """Give the lease back (the turn ended, or the runner is shutting down; a turn that
    pauses gives it back in that change, _free_lease)."""
    try:
        conversation = _held(lease)
    except LeaseLost:
        return
    conversation.lease_owner = ""
    conversation.lease_expires_at = None
    save_fields(conversation, ["lease_owner", "lease_expires_at"])


@transaction.atomic
def current(lease: Lease) -> TurnState:
    conversation = _held(lease)
    return TurnState(AgentState(conversation.agent_state), conversation.turn_steps)


@transaction.atomic
def begin_step(lease: Lease, *, limit: int | None = None) -> Draft | None:
    """Count a model request before it is sent, and open the draft its reply streams into.
    Returns that draft, or None (and counts nothing) when the turn already made `limit`
    requests."""
    conversation = _held(lease, AgentState.LLM_REQUESTING, saved_later=True)
    if limit is not None and conversation.turn_steps >= limit:
        save_fields(conversation, ["lease_expires_at"])
        return None
    conversation.turn_steps += 1
    return _open_draft(
        conversation, save=partial(save_fields, conversation, ["turn_steps", "lease_expires_at"])
    )


@transaction.atomic
def stream_text(lease: Lease, text: str) -> Draft:
    """The model's text so far, shown in the turn's draft message; returns that draft."""
    conversation = _held(lease, AgentState.LLM_REQUESTING, saved_later=True)
    draft = _draft(conversation)
    if draft is None:
        draft = transcript.append_message(
            conversation, role=Role.ASSISTANT, blocks=[TextBlock(text=text)], is_draft=True
        )
    else:
        transcript.stream_into_draft(conversation, draft, text)
    return Draft(draft.pk, text)


@transaction.atomic
def complete_step(lease: Lease, *, text: str, tool_calls: list[ToolCallBlock]) -> TurnState:
    """Store the model's whole answer; then run its tools, or end the turn. Returns the
    turn's state after it, which the runner goes on from without reading it again."""
    conversation = _held(lease, AgentState.LLM_REQUESTING, saved_later=True)
    tool_calls = _with_unique_ids(conversation, tool_calls)
    blocks = ([TextBlock(text=text)] if text else []) + list(tool_calls)
    # The next state first: the message's change saves it with the row (one change).
    if tool_calls:
        conversation.agent_state = AgentState.TOOL_EXECUTING
    else:
        conversation.agent_state = AgentState.IDLE
        _free_lease(conversation)  # as _end does
    draft = _draft(conversation)
    if draft is not None:
        # Even when empty: open tabs show the draft, so it is kept (and hidden) rather than
        # deleted, which the catch-up protocol could not express.
        transcript.update_message(conversation, draft, blocks=blocks, is_draft=False)
    elif blocks:
        transcript.append_message(conversation, role=Role.ASSISTANT, blocks=blocks)
    else:
        transcript.save_conversation(conversation)
    state = AgentState(conversation.agent_state)
    return TurnState(state, conversation.turn_steps, tuple(tool_calls) if tool_calls else None)


@transaction.atomic
def pending_tool_calls(lease: Lease) -> list[ToolCallBlock]:
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    return _open_tool_calls(conversation)


@transaction.atomic
def record_tool_result(lease: Lease, result: ToolResultBlock) -> None:
    """Store one tool result, exactly once per tool call."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    if result.tool_call_id in {call.id for call in _open_tool_calls(conversation)}:
        transcript.append_message(conversation, role=Role.TOOL, blocks=[result])


@transaction.atomic
def tools_done(lease: Lease) -> TurnState:
    """The tools ran: the model is asked again. Returns the turn's state after it."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    _close_open_tool_calls(conversation, MISSING_RESULT)
    conversation.agent_state = AgentState.LLM_REQUESTING
    transcript.save_conversation(conversation)
    return TurnState(AgentState(conversation.agent_state), conversation.turn_steps)


@transaction.atomic
def fail(
    lease: Lease, message: str = AGENT_FAILED, *, retryable: bool = True, detail: str = ""
) -> None:
    """End the turn in the error state with an error block; keeps everything written so far.
    Only a running turn can fail: one that already paused or ended is left as it is."""
    conversation = _held(lease, *RUNNING_STATES)
    _finalize_draft(conversation)
    _close_open_tool_calls(conversation, MISSING_RESULT)
    transcript.append_message(
        conversation,
        role=Role.SYSTEM,
        blocks=[ErrorBlock(message=message, detail=detail, retryable=retryable)],
    )
    _end(conversation, AgentState.ERROR)
    _stop_subagents(conversation)


@transaction.atomic
def spawn_subagents(lease: Lease, call: ToolCallBlock, tasks: list[tuple[str, str]]) -> None:
    """Start one sub-agent turn per (title, task) for `call`, each in a child conversation
    whose first user message is the task; idempotent, so a runner that takes the parent's
    turn over finds the children its predecessor made and starts none twice."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    if conversation.children.filter(parent_tool_call_id=call.id).exists():
        return
    for index, (title, task) in enumerate(tasks):
        child = Conversation.objects.create(
            owner_id=conversation.owner_id,
            title=title,
            parent=conversation,
            parent_tool_call_id=call.id,
            subagent_index=index,
            agent_state=AgentState.LLM_REQUESTING,
            lease_expires_at=queued_lease_expiry(),
        )
        transcript.append_message(child, role=Role.USER, blocks=[TextBlock(text=task)])
        runner.dispatch_on_commit(child.pk)
    # The call's message changes (it now shows the children), so open pages render them.
    message = _message_with_call(conversation, call.id)
    transcript.update_message(
        conversation, message, blocks=parse_blocks(message.blocks), is_draft=False
    )


@transaction.atomic
def refuse_tool_calls(
    lease: Lease, calls: list[ToolCallBlock], *, result: str, error: str, detail: str = ""
) -> None:
    """Give each call an error result for the model, and show the user one error card saying
    why (`error`, with `detail` in plain words); the turn goes on."""
    conversation = _held(lease, AgentState.TOOL_EXECUTING)
    open_ids = {call.id for call in _open_tool_calls(conversation)}
    for call in calls:
        if call.id in open_ids:
            transcript.append_message(
                conversation,
                role=Role.TOOL,
                blocks=[
                    ToolResultBlock.error(call.id, result).model_copy(
                        update={"shown_elsewhere": True}
                    )
                ],
            )
    transcript.append_message(
        conversation, role=Role.SYSTEM, blocks=[ErrorBlock(message=error, detail=detail)]
    )


@transaction.atomic(savepoint=False)  # in its caller's transaction (questions.services.ask)
def pause(lease: Lease, call: ToolCallBlock, action: ActionBlock, *, limit: int) -> bool:
    """Show `action` under the message that made `call` and wait for the user: tool_executing ->
    awaiting_user. Returns False (nothing changes) if the turn already paused `limit` times."""
    # The change saves the row (and gives the lease back); a refused pause is followed by the
    # refusal's own change, which holds the lease again.
    conversation = _held(lease, AgentState.TOOL_EXECUTING, saved_later=True)
    if conversation.turn_pauses >= limit:
        return False
    message = _message_with_call(conversation, call.id)
    conversation.turn_pauses += 1
    conversation.agent_state = AgentState.AWAITING_USER
    _free_lease(conversation)
    # One change: the message's update saves the new state with it.
    transcript.update_message(
        conversation, message, blocks=[*parse_blocks(message.blocks), action], is_draft=False
    )
    _attention_changed(conversation)
    return True


def resume(conversation: Conversation, *, result: ToolResultBlock) -> None:
    """Store the pausing call's one result and carry on: the calls left after it first, then
    the model. The caller holds the row lock and has checked the pause is still open."""
    transcript.append_message(conversation, role=Role.TOOL, blocks=[result])
    # The user is back in the loop: the step budget starts again (the pause budget not).
    conversation.turn_steps = 0
    calls_left = bool(_open_tool_calls(conversation))
    _set_running(
        conversation, AgentState.TOOL_EXECUTING if calls_left else AgentState.LLM_REQUESTING
    )
    _attention_changed(conversation)


def decline(
    conversation: Conversation, *, result: ToolResultBlock, unrun_result: str, notice: str
) -> None:
    """Store the pausing call's one result and end the turn (idle); calls left after it get
    `unrun_result`, and the user reads `notice` (an English msgid) saying what happened and
    what to do next. The caller holds the row lock and has checked the pause is still open."""
    transcript.append_message(conversation, role=Role.TOOL, blocks=[result])
    _close_open_tool_calls(conversation, unrun_result)
    transcript.append_message(conversation, role=Role.SYSTEM, blocks=[NoticeBlock(message=notice)])
    _end(conversation, AgentState.IDLE)
    _attention_changed(conversation)


def stale_runs() -> list[int]:
    """Running turns that no runner holds: never claimed (when queued for the workers: not
    within a lease period, queued_lease_expiry), or the holder stopped renewing."""
    return list(
        Conversation.objects.filter(
            Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now()),
            agent_state__in=RUNNING_STATES,
        ).values_list("pk", flat=True)
    )


# --- Helpers (the caller holds the row lock) --------------------------------------------------

_LEASE_FIELDS = ["lease_owner", "lease_expires_at", "lease_token", "turn_steps"]


def _set_running(conversation: Conversation, state: AgentState) -> None:
    """Put the turn in the running `state`, save it, and get it a runner after commit.

    When this process runs turns itself (chat.runner.runs_turns_here: one process, no Redis),
    its runner takes the lease in this same transaction, as `claim` would: the model request
    is counted and its draft opened here, so the request goes out as soon as this commits,
    without a claim transaction of its own waiting behind the open tabs that render this very
    change. Should the process die before the runner starts, the lease lapses and the sweep
    of any process runs the turn, as for a runner that died mid-turn. Otherwise the lease is
    left free and a runner is dispatched to claim it.

    The request's history is read here too, so starting the turn must be the transaction's
    last change to the transcript (it is, in every caller: begin_turn and resume end them).
    """
    conversation.agent_state = state
    conversation.lease_owner = ""
    conversation.lease_expires_at = None
    save = partial(transcript.save_conversation, conversation)
    if not runner.runs_turns_here():
        conversation.lease_expires_at = queued_lease_expiry()
        save()
        runner.dispatch_on_commit(conversation.pk)
        return
    claim = _take_lease(conversation, step_limit=settings.AGENT_MAX_STEPS)
    if claim.step_started:
        claim = dataclasses.replace(claim, draft=_open_draft(conversation, save=save))
    else:
        save()
    runner.run_claimed_on_commit(claim)


def _take_lease(conversation: Conversation, *, step_limit: int | None) -> Claim:
    """Give the running turn's lease to this process's runner (a new fencing token), and with
    `step_limit` count its next model request (claim). The caller saves the row."""
    taken_from = conversation.lease_owner
    conversation.lease_owner = RUNNER_ID
    conversation.lease_expires_at = timezone.now() + lease_duration()
    conversation.lease_token += 1
    step_started = (
        step_limit is not None
        and conversation.agent_state == AgentState.LLM_REQUESTING
        and conversation.turn_steps < step_limit
    )
    if step_started:
        conversation.turn_steps += 1
    return Claim(
        Lease(conversation.pk, conversation.lease_token),
        taken_from,
        is_subagent=conversation.parent_id is not None,
        turn=TurnState(AgentState(conversation.agent_state), conversation.turn_steps),
        step_started=step_started,
    )


def _held(lease: Lease, *states: AgentState, saved_later: bool = False) -> Conversation:
    """Lock the conversation, check the lease is still this runner's, and extend it.
    `saved_later`: the caller saves the whole row in this transaction (every change does,
    chat.transcript.save_conversation), which writes the extension with it."""
    conversation = transcript.lock(lease.conversation_id)
    if conversation.lease_token != lease.token or conversation.lease_owner != lease.owner:
        raise LeaseLost
    if states and conversation.agent_state not in states:
        raise LeaseLost
    conversation.lease_expires_at = timezone.now() + lease_duration()
    if not saved_later:
        save_fields(conversation, ["lease_expires_at"])
    return conversation


def _end(conversation: Conversation, state: AgentState) -> None:
    """Leave the running states, and give the lease back in that same change (as a pause
    does, _free_lease): the runner sees it and stops, with nothing more to write."""
    conversation.agent_state = state
    _free_lease(conversation)
    transcript.save_conversation(conversation)


def _free_lease(conversation: Conversation) -> None:
    """A turn that pauses gives its lease back in that same change: its runner, done, need
    not write again (chat.runtime.run_turn), and the answer, which the user may give the
    moment the question shows, does not wait on that write (on SQLite, a writer that finds
    the database locked backs off for up to tens of ms)."""
    conversation.lease_owner = ""
    conversation.lease_expires_at = None


def _attention_changed(conversation: Conversation) -> None:
    """A pause began or ended: the owner's pages recount what waits for them."""
    waiting = conversation.agent_state == AgentState.AWAITING_USER
    events.send_attention_event_on_commit(
        conversation.owner_id,
        events.attention_changed(conversation.owner_id, conversation.pk, waiting=waiting),
    )


def _stop_subagents(conversation: Conversation) -> None:
    """Stop the running sub-agents of a turn that ended. Locks parent before child, the only
    order in which both are ever locked."""
    for child_id in conversation.children.filter(agent_state__in=RUNNING_STATES).values_list(
        "pk", flat=True
    ):
        child = transcript.lock(child_id)
        if not child.is_running:
            continue
        _finalize_draft(child)
        _close_open_tool_calls(child, STOPPED_RESULT)
        child.lease_token += 1
        transcript.append_message(
            child, role=Role.SYSTEM, blocks=[ErrorBlock(message=SUBAGENT_STOPPED)]
        )
        _end(child, AgentState.ERROR)
        runner.cancel_local_on_commit(child.pk)


def _open_draft(conversation: Conversation, *, save: Callable[[], object]) -> Draft:
    """The draft the step's reply streams into, made (empty) as the step starts: open pages
    render it while the model request is on its way (an empty draft is not shown), so the
    first text reaches them as a plain append (chat.transcript.stream_into_draft).

    `save`: how the caller saves what it changed in the row. A new draft's change saves the
    whole row, and that with it (one write); `save` runs only if the draft is there already."""
    draft = _draft(conversation)
    if draft is None:
        draft = transcript.append_message(
            conversation, role=Role.ASSISTANT, blocks=[TextBlock(text="")], is_draft=True
        )
    else:
        save()
    return Draft(draft.pk, transcript.draft_text(draft))


# Read by every write of streamed text (chat.compiled).
_DRAFT = CompiledQuery(
    lambda conversation_id: Message.objects.filter(
        conversation_id=conversation_id, is_draft=True
    ).order_by("-order")[:1]
)


def _draft(conversation: Conversation) -> Message | None:
    return _DRAFT.first(conversation_id=conversation.pk)


def _finalize_draft(conversation: Conversation) -> None:
    """Keep what the turn's draft shows, as a message that is no longer a draft. A draft that
    never got any text (the turn stopped or failed before the model's first word) is kept too,
    empty and hidden, as complete_step keeps one: open tabs have it, and a deletion is not a
    change they would see, so text a runner sent ahead (chat.runtime.StreamWriter) before
    learning of the stop would show in it."""
    draft = _draft(conversation)
    if draft is None:
        return
    blocks = [b for b in parse_blocks(draft.blocks) if not isinstance(b, TextBlock) or b.text]
    transcript.update_message(conversation, draft, blocks=blocks, is_draft=False)


def _retire_retry(conversation: Conversation, *, superseded: bool = False) -> None:
    """A new turn makes earlier Retry buttons meaningless: take them off every open tab (and,
    for a retry, the failure it retries)."""
    update = {"retryable": False, **({"superseded": True} if superseded else {})}
    for message in conversation.messages.filter(role=Role.SYSTEM):
        blocks = parse_blocks(message.blocks)
        if any(isinstance(b, ErrorBlock) and b.retryable for b in blocks):
            retired = [
                b.model_copy(update=update) if isinstance(b, ErrorBlock) and b.retryable else b
                for b in blocks
            ]
            transcript.update_message(conversation, message, blocks=retired, is_draft=False)


def _with_unique_ids(conversation: Conversation, calls: list[ToolCallBlock]) -> list[ToolCallBlock]:
    """Tool-call ids must be unique in the transcript and safe in URLs; providers do not
    always ensure that (a missing id, one reused across steps), so such ids are replaced."""
    if not calls:
        return calls
    # Every call of the transcript, superseded ones too, read from the stored JSON alone:
    # reading whole messages and parsing every block was ~12 ms a step in a transcript of
    # 1,000 messages, this ~2.6 (2-core machine).
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


def _open_tool_calls(conversation: Conversation) -> list[ToolCallBlock]:
    """Tool calls of the transcript that have no result yet, in order: read back to the start
    of the last turn (selectors.last_turn_newest_first), as every way a turn ends gives each
    of its calls a result (tools_done, stop_turn, fail, decline; complete_step ends a turn
    only with a step that made none). Reading the whole transcript was ~21 ms in one of 1,000
    messages (2-core machine), for every answer and twice in every tool step."""
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


def _close_open_tool_calls(conversation: Conversation, content: str) -> None:
    for call in _open_tool_calls(conversation):
        transcript.append_message(
            conversation,
            role=Role.TOOL,
            blocks=[ToolResultBlock.error(call.id, content)],
        )
