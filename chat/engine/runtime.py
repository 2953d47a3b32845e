"""The agent runtime: advances one conversation's turn, one persisted step at a time.

It holds no state of its own. Each step reads the conversation's state from the database,
does the step's work, and commits the next state through chat.engine.turns, presenting its
lease. So a runner that dies at any point leaves a turn that any process can pick up and
finish: the model's draft is streamed again, and each tool call gets exactly one stored result.
"""

import asyncio
import contextlib
import logging
import time

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction

from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import dispatch, tools, turns, window
from chat.engine.providers import get_provider
from chat.engine.providers.base import HistoryMessage, ProviderError, TextDelta, ToolCallRequest
from chat.engine.tools import Paused, Refusal, ToolContext
from chat.errors import ConversationNotFound
from chat.models import AgentState, Message
from core import events
from core.text import drop_invisible

logger = logging.getLogger("parley.runtime")

db = database_sync_to_async

# Streamed text is written at most this often (seconds), not once per token.
STREAM_FLUSH_INTERVAL = 0.05
# Backoff between provider retries: BASE * 2**attempt, capped.
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 8.0


def build_history(conversation_id: int) -> list[HistoryMessage]:
    """The model's view of the transcript: text and tool calls only (no drafts, errors or
    action blocks), every tool call followed by exactly one result (a missing one is filled
    in, a duplicate dropped), and a user's reply to a pausing call only once, as its result.
    Superseded messages (Regenerate, an edit) are left out."""
    stored = (
        Message.objects.filter(conversation_id=conversation_id, superseded=False)
        .order_by("order")
        .only("pk", "role", "order", "blocks", "is_draft")
    )
    messages = [(m, parse_blocks(m.blocks)) for m in stored]
    results: dict[str, ToolResultBlock] = {}
    replies: set[int] = set()
    for _, parsed in messages:
        for block in parsed:
            if isinstance(block, ToolResultBlock):
                results.setdefault(block.tool_call_id, block)
                if block.reply_message_id is not None:
                    replies.add(block.reply_message_id)
    history: list[HistoryMessage] = []
    placed: set[str] = set()
    for message, parsed in messages:
        if message.is_draft or message.role in ("system", "tool") or message.pk in replies:
            continue  # tool results are placed right after the call that asked for them
        blocks = [
            b
            for b in parsed
            if isinstance(b, ToolCallBlock) or (isinstance(b, TextBlock) and b.text)
        ]
        if blocks:
            history.append(HistoryMessage(role=message.role, blocks=blocks, order=message.order))
        calls = [b for b in blocks if isinstance(b, ToolCallBlock) and b.id not in placed]
        if calls:
            answered = [
                results.get(c.id) or ToolResultBlock.error(c.id, turns.MISSING_RESULT)
                for c in calls
            ]
            placed.update(c.id for c in calls)
            history.append(HistoryMessage(role="tool", blocks=answered, order=message.order))
    return history


# A claimed turn: its lease, and the history of the model request the claim started (if any).
Started = tuple[turns.Claim, list[HistoryMessage] | None]


@transaction.atomic
def claim_turn(conversation_id: int) -> Started | None:
    """Claim the turn and, when its next step is a model request, start that step and read
    its history in the same transaction: the request goes out after one commit."""
    claim = turns.claim(conversation_id, step_limit=settings.AGENT_MAX_STEPS)
    if claim is None:
        return None
    return claim, build_history(conversation_id) if claim.draft is not None else None


@transaction.atomic
def start_step(lease: turns.Lease) -> tuple[list[HistoryMessage], turns.Draft] | None:
    """Count the model request and read the history it is sent with; None when the turn has
    made its AGENT_MAX_STEPS."""
    draft = turns.begin_step(lease, limit=settings.AGENT_MAX_STEPS)
    if draft is None:
        return None
    return build_history(lease.conversation_id), draft


class StreamWriter:
    """Accumulates streamed text and writes it to the draft in batches.

    Open pages see each batch as it is about to be written, not once it is: when the draft's
    stored text is known (`draft`: this runner opened it, or wrote it last) and the batch only
    adds to it, the new text goes to the conversation's pages first (events.draft_streamed),
    and the write's own change follows; a tab that showed it early takes that change as already
    shown (chat.live.consumers). The step's first words are shown the moment they arrive and
    stored with the next batch; the last batch is only shown, and stored by the step's
    completion, which writes the whole text anyway."""

    def __init__(self, lease: turns.Lease, draft: turns.Draft | None = None) -> None:
        self.lease = lease
        self.draft = draft
        self.text = ""
        self.written = ""
        self.shown = ""  # the text shown ahead of its write, past the stored draft's
        self.last_write = 0.0

    async def add(self, delta: str) -> None:
        self.text += delta
        if not self.written and not self.shown and await self.show_ahead():
            self.last_write = time.monotonic()  # the batch it goes with starts now
        elif time.monotonic() - self.last_write >= STREAM_FLUSH_INTERVAL:
            await self.flush()

    async def flush(self) -> None:
        if self.text != self.written:
            await self.show_ahead()
            self.draft = await db(turns.stream_text)(self.lease, self.text)
            self.written = self.text
            self.last_write = time.monotonic()

    async def show_ahead(self) -> bool:
        """Send the pages the text not yet shown to them, if it only adds to what they have
        of the draft (the stored text, and what was shown ahead since it). True if sent."""
        draft = self.draft
        if draft is None or draft.text is None:
            return False
        base = self.shown if self.shown.startswith(draft.text) else draft.text
        if not (len(self.text) > len(base) and self.text.startswith(base)):
            return False
        conversation_id = self.lease.conversation_id
        await events.publish(
            events.conversation_group(conversation_id),
            events.draft_streamed(
                conversation_id, draft.message_id, at=len(base), text=self.text[len(base) :]
            ),
        )
        self.shown = self.text
        return True

    def restart(self) -> None:
        """A retried request streams from the start again, over the same draft."""
        self.text = ""
        self.shown = ""


async def request_model(
    context: ToolContext, provider, history: list[HistoryMessage], draft: turns.Draft | None
) -> tuple[str, list[ToolCallBlock]]:
    """One model response, retried with backoff on retryable failures. `draft`: the one its
    text streams into, as stored (StreamWriter); a sub-agent's shows on its parent's page,
    which reads it, so its text is not sent ahead."""
    lease = context.lease
    writer = StreamWriter(lease, None if context.is_subagent else draft)
    await tools.prepare()
    specs = tools.specs(is_subagent=context.is_subagent)
    summary = None
    if settings.AGENT_SUMMARIZE:
        summary = await db(window.stored_summary)(lease.conversation_id)
    budget = await window.budget_of(provider)
    # Raises ContextOverflow: nothing is sent.
    fitted = window.fit(history, specs, budget=budget, summary=summary)
    if fitted.left_out:
        logger.info(
            "conversation %s: %s earlier messages left out of the model's context",
            lease.conversation_id,
            fitted.left_out,
        )
        if summary is not None:
            fitted = await summarized(lease, provider, fitted, summary)
    history = fitted.history
    for attempt in range(settings.AGENT_RETRIES + 1):
        writer.restart()
        calls: list[ToolCallBlock] = []
        try:
            async for event in provider.stream(history=history, tools=specs):
                if isinstance(event, TextDelta):
                    await writer.add(drop_invisible(event.text))
                elif isinstance(event, ToolCallRequest):
                    name = drop_invisible(event.name)
                    calls.append(ToolCallBlock(id=event.id, name=name, arguments=event.arguments))
            await writer.show_ahead()
            return writer.text, calls
        except ProviderError as error:
            if not error.retryable or attempt == settings.AGENT_RETRIES:
                raise
            delay = min(RETRY_BASE_SECONDS * 2**attempt, RETRY_MAX_SECONDS)
            logger.warning("provider failed (%s); retry %s in %.1fs", error, attempt + 1, delay)
            await asyncio.sleep(delay)
            await db(turns.renew)(lease)
    raise AssertionError("unreachable")  # pragma: no cover


async def summarized(
    lease: turns.Lease, provider, fitted: window.Fitted, summary: window.Summary
) -> window.Fitted:
    """`fitted` with the summary of what it leaves out: the stored `summary`, extended by the
    model with what was left out since (and stored); the plain note if the model cannot say."""
    new = tuple(m for m in fitted.dropped if m.order > summary.through)
    if new:
        request = window.summary_request(summary.text, new)
        try:
            text = "".join(
                [
                    drop_invisible(event.text)
                    async for event in provider.stream(history=[request], tools=[])
                    if isinstance(event, TextDelta)
                ]
            ).strip()
        except ProviderError as error:
            logger.warning("summary of conversation %s failed: %s", lease.conversation_id, error)
            return fitted
        if not text:
            return fitted
        summary = window.Summary(text[: window.SUMMARY_CHARS], max(m.order for m in new))
        await db(window.store_summary)(lease.conversation_id, summary)
    return window.with_summary(fitted, summary.text) if summary.text else fitted


async def advance(
    context: ToolContext,
    state: turns.TurnState,
    history: list[HistoryMessage] | None = None,
    draft: turns.Draft | None = None,
) -> AgentState:
    """Run the turn's steps until it ends, pauses or fails; returns the state it left.
    `state`: the turn's state as the claim read it; `history`: the model request it shows
    was already started (claim_turn), with `draft`."""
    lease = context.lease
    provider = get_provider()
    while True:
        if state.state == AgentState.LLM_REQUESTING:
            if history is None:
                started = await db(start_step)(lease)
                if started is None:
                    await db(_fail)(lease, turns.STEP_LIMIT, retryable=False)
                    return AgentState.ERROR
                history, draft = started
            try:
                text, calls = await request_model(context, provider, history, draft)
            except window.ContextOverflow as overflow:
                detail = str(overflow)
                await db(_fail)(lease, turns.CONTEXT_OVERFLOW, retryable=False, detail=detail)
                return AgentState.ERROR
            state = await db(turns.complete_step)(lease, text=text, tool_calls=calls)
        elif state.state == AgentState.TOOL_EXECUTING:
            if await run_tools(context, state.tool_calls):
                return AgentState.AWAITING_USER
            state = await db(turns.tools_done)(lease)
        else:
            return state.state
        # Each step's state is its own: not read again before the next (every next write
        # checks the lease, so a turn stopped meanwhile still stops there).
        history = draft = None


async def run_tools(context: ToolContext, calls: tuple[ToolCallBlock, ...] | None) -> bool:
    """Run the open tool calls in order (`calls`: as the step that made them stored them;
    else read). True if a pausing call paused the turn."""
    lease = context.lease
    calls = list(calls) if calls is not None else await db(turns.pending_tool_calls)(lease)
    await tools.prepare()
    if (refusal := tools.batch_refusal(calls)) is not None:
        await db(turns.refuse_tool_calls)(
            lease, calls, result=refusal.result, error=refusal.error, detail=refusal.detail
        )
        return False
    for call in calls:
        outcome = await tools.run(call, context)
        if isinstance(outcome, Paused):
            return True
        if isinstance(outcome, Refusal):
            await db(turns.refuse_tool_calls)(
                lease, [call], result=outcome.result, error=outcome.error, detail=outcome.detail
            )
        else:
            await db(turns.record_tool_result)(lease, outcome)
    return False


def _fail(lease: turns.Lease, message: str = turns.AGENT_FAILED, **options) -> None:
    dispatch.on_commit(turns.fail(lease, message, **options))


async def _heartbeat(lease: turns.Lease, task: asyncio.Task) -> None:
    """Renew the lease while the turn runs; cancel the turn if the lease is lost."""
    interval = settings.PARLEY_LEASE_SECONDS / 3
    while True:
        await asyncio.sleep(interval)
        try:
            await db(turns.renew)(lease)
        except (turns.LeaseLost, ConversationNotFound):
            task.cancel()
            return
        except Exception:
            logger.exception("could not renew the lease of conversation %s", lease.conversation_id)


async def run_turn(conversation_id: int, started: Started | None = None) -> None:
    """Claim the conversation's running turn, if nobody holds it, and drive it to its end.
    `started`: the claim already taken for this runner (turns.claims_here), with the history
    of the model request it started; else the turn is claimed here.

    Logs one line when the turn is claimed (or taken over from a runner that stopped renewing)
    and one when this runner lets go of it: paused, finished, failed, stopped or handed back.
    """
    if started is None:
        started = await db(claim_turn)(conversation_id)
    if started is None:
        return
    claim, history = started
    lease = claim.lease
    log = {"conversation": conversation_id, "runner": lease.owner}
    if claim.taken_from:
        logger.info(
            "turn of conversation %s taken over from %s",
            conversation_id,
            claim.taken_from,
            extra={**log, "event": "taken_over", "previous_runner": claim.taken_from},
        )
    else:
        logger.info(
            "turn of conversation %s claimed", conversation_id, extra={**log, "event": "claimed"}
        )
    context = ToolContext(lease=lease, is_subagent=claim.is_subagent)
    heartbeat = asyncio.create_task(_heartbeat(lease, asyncio.current_task()))
    began = time.monotonic()
    outcome = "handed_back"
    try:
        outcome = OUTCOMES[await advance(context, claim.turn, history, claim.draft)]
    except (turns.LeaseLost, ConversationNotFound):
        outcome = "stopped_or_taken_over"
    except asyncio.CancelledError:
        outcome = "handed_back"  # this process is shutting down (or the user pressed Stop)
    except Exception as error:
        outcome = "failed"
        if isinstance(error, ProviderError):
            logger.warning("turn of conversation %s failed: %s", conversation_id, error)
        else:
            logger.exception("turn of conversation %s failed", conversation_id)
        cause = error.cause if isinstance(error, ProviderError) else ""
        with contextlib.suppress(turns.LeaseLost, ConversationNotFound):
            await db(_fail)(lease, detail=cause)
    finally:
        heartbeat.cancel()
        # A pause and a turn's end give the lease back in their own change.
        if outcome not in ("paused", "finished"):
            with contextlib.suppress(ConversationNotFound):
                await db(turns.release)(lease)
        seconds = round(time.monotonic() - began, 3)
        logger.info(
            "turn of conversation %s %s after %.3fs",
            conversation_id,
            outcome.replace("_", " "),
            seconds,
            extra={**log, "event": outcome, "duration": seconds},
        )


# How a turn left this runner, by the state it left the conversation in.
OUTCOMES = {
    AgentState.AWAITING_USER: "paused",
    AgentState.IDLE: "finished",
    AgentState.ERROR: "failed",
    AgentState.LLM_REQUESTING: "handed_back",
    AgentState.TOOL_EXECUTING: "handed_back",
}
