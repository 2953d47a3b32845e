"""The MCP servers' tools as the agent's tools (chat.engine.tools): named
`mcp__<server>__<tool>`, with the server's description and input schema, and approval before
any call that is not known to be harmless.

Policy, per call: the approval rules decide (questions.rules: the operator's `approval.rules`
in MCP_CONFIG, and the rules of the person who started the turn — their message, edit, Retry
or Regenerate —, never someone else's); when none matches, the operator's setting for the
tool or its server (MCP_CONFIG `approval` `default`/`tools`), else a read-only tool
(`readOnlyHint`) runs at once and every other tool asks. A call a rule allows or denies is
recorded as an approval the rule resolved, naming it. "deny" tools (the `default`/`tools`
setting) are not offered. A sub-agent's call that asks is shown in its parent's conversation
and waits there as it runs (McpTool.ask_in_parent), while the sub-agent's siblings run on.

Exactly once: a ToolRun row is committed before the call goes out, and the result is stored
after it. A turn that finds the row but no result (its process died in between) does not
call again: the model is told the call was interrupted and may or may not have happened.
"""

import asyncio
import functools
import json
import logging
import re
import uuid
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from django.utils import translation

from chat.blocks import ToolCallBlock, ToolResultBlock
from chat.engine import tools, turns
from chat.engine.tools import MAX_RESULT_CHARS, PAUSED, Outcome, Tool, ToolContext, ToolSpec
from core import events
from core.text import drop_invisible
from mcp_client import inputs, signin
from mcp_client.config import ALLOW, ASK, DENY, ServerConfig
from mcp_client.connections import Call, Connections, ServerConnection
from mcp_client.models import ToolRun
from questions import approvals, asking, resolving, selectors
from questions.models import QuestionStatus
from questions.payloads import DENY as DENIED_DECISION
from questions.payloads import MAX_SHOWN_CHARS, ApprovalRequest

logger = logging.getLogger("parley.mcp_client")

db = database_sync_to_async

PREFIX = "mcp__"
# Model providers allow these characters in a tool's name, and at most 64 of them.
NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64
MAX_DESCRIPTION = 2_000

# What the model reads (English: it is the model's input, not the page's).
DENIED = "The user denied this call: the tool did not run."
FEEDBACK = " Their feedback: {feedback}"
EXPIRED = "Not run: the user did not decide on this call in time. Do not assume it was allowed."
CANCELLED = "Not run: the approval of this call was cancelled."
INTERRUPTED = (
    "This call was interrupted: its process stopped while the tool was running, so it may or "
    "may not have happened. It was not run again. Check its effect before you rely on it or "
    "call it again."
)
EDITED = (
    "The user edited the arguments before allowing this call; it ran with these arguments "
    "instead of yours: {arguments}\n\n"
)
NOT_CONNECTED = "The MCP server {server} is not available ({error}); the tool did not run."
FAILED = "The MCP server {server} failed while running {tool}: {error}"
TIMED_OUT = "{tool} did not finish within {seconds:g} seconds; it may or may not have happened."
CUT = "\n\n[The result was cut to {kept} of its {total} characters.]"
NOT_OFFERED = "The operator does not allow {name}."
NEEDS_SIGN_IN = (
    "Not run: {server} needs the user's own account, and they have not connected it. Tell them "
    "to open Settings, Tools, and choose Connect beside {server}; then try again."
)
SIGN_IN_FAILED = (
    "Not run: {server} no longer accepts the user's sign-in ({why}). Tell them to open "
    "Settings, Tools, and choose Connect again beside {server}; then try again."
)
RULE_DENIED = "An approval rule denied this call: the tool did not run. Do not try it again."
VOTED = "Allowed by {people}: this call needed several people's approval.\n"
STEP_STOPPED = (
    "Not run: the user denied another call of this step ({title}), which stops the whole step. "
    "None of its calls ran."
)


def exposed_name(server: str, tool: str) -> str:
    return (PREFIX + server + "__" + NAME_CHARS.sub("_", tool))[:MAX_NAME]


class McpTool(Tool):
    """One tool of one MCP server."""

    def __init__(self, server: ServerConnection, tool: types.Tool) -> None:
        self.server = server
        self.tool = tool
        self.name = exposed_name(server.name, tool.name)
        annotations = tool.annotations
        title = tool.title or (annotations.title if annotations else None) or tool.name
        self.title = drop_invisible(title)[:200]  # the server's text: shown escaped
        self.source = server.name
        self.read_only = bool(annotations and annotations.read_only_hint)
        self.description = drop_invisible(tool.description or self.title)[:MAX_DESCRIPTION]
        self.parameters = tool.input_schema if isinstance(tool.input_schema, dict) else {}

    @property
    def config(self) -> ServerConfig:
        return self.server.config

    @property
    def policy(self) -> str:
        """The operator's policy for this tool, with the default filled in."""
        return self.config.policy(self.tool.name) or (ALLOW if self.read_only else ASK)

    def enabled(self) -> bool:
        return self.policy != DENY

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters or {"type": "object"})

    def approval_request(self, call: ToolCallBlock, verdict=None) -> ApprovalRequest:
        """What the call's approval shows; with the rules' `verdict`, the rule that made it
        ask and the shadow rules that matched it (the audit)."""
        return ApprovalRequest.of(
            name=self.name,
            server=self.server.name,
            tool=self.tool.name,
            title=self.title,
            description=self.description,
            arguments=call.arguments,
            input_schema=self.parameters,
            asked_by=verdict.note if verdict is not None and verdict.effect == ASK else None,
            shadow=[rule.note() for rule in verdict.shadow] if verdict is not None else None,
        )

    def verdict(self, conversation_id: int, call: ToolCallBlock, *, spend: bool = True):
        """The approval rules' verdict on `call` (questions.approvals.verdict_for), the
        operator's policy when no rule matches."""
        return approvals.verdict_for(
            conversation_id,
            server=self.server.name,
            tool=self.tool.name,
            arguments=call.arguments if isinstance(call.arguments, dict) else {},
            default=self.policy,
            spend=spend,
        )

    async def run(self, call: ToolCallBlock, context: ToolContext) -> Outcome:
        conversation_id = context.conversation_id
        refused = await self.unsigned(call, conversation_id)
        if refused is not None:
            return refused
        decided = await db(approvals.decision_for)(conversation_id, call.id)
        if decided is None:
            verdict = await db(self.verdict)(conversation_id, call)
            if verdict.effect == ASK and context.is_subagent:
                decided = await self.ask_in_parent(call, context, verdict)
            elif verdict.effect == ASK:
                asks = await db(_approvals_to_ask)(context.lease, call, verdict)
                await db(asking.ask_approvals)(context.lease, asks)
                return PAUSED
            else:
                if verdict.rule is not None:
                    await db(asking.record_rule_decision)(
                        context.lease,
                        call,
                        self.approval_request(call, verdict),
                        decision=verdict.effect,
                        rule=verdict.rule.note(),
                    )
                if verdict.effect == DENY:
                    return ToolResultBlock.error(call.id, RULE_DENIED)
                return await self.call(call, context, call.arguments, edited=False)
        refused = refusal(call, decided)
        if refused is not None:
            return refused
        edited = decided.arguments is not None
        arguments = decided.arguments if edited else call.arguments
        return await self.call(call, context, arguments, edited=edited, votes=decided.votes)

    async def unsigned(self, call: ToolCallBlock, conversation_id: int) -> ToolResultBlock | None:
        """For a server each user signs in to: the model's result when the turn's user has no
        working sign-in (nothing is asked, nothing runs); None otherwise."""
        if not self.config.per_user:
            return None
        user_id = await db(signin.turn_user_id)(conversation_id)
        why = await db(signin.sign_in_problem)(user_id, self.server.name)
        if why is None:
            return None
        return ToolResultBlock.error(call.id, self.not_signed_in(why))

    def not_signed_in(self, why: str) -> str:
        """What the model reads when the user has no working sign-in (`why`: its problem code)."""
        if not why:
            return NEEDS_SIGN_IN.format(server=self.server.name)
        with translation.override("en"):
            return SIGN_IN_FAILED.format(server=self.server.name, why=signin.problem_text(why))

    async def ask_in_parent(
        self, call: ToolCallBlock, context: ToolContext, verdict
    ) -> approvals.Decided:
        """A sub-agent's call that asks: its approval is shown in the parent's conversation
        and this call waits for the decision (or its deadline), as a running tool waits for an
        elicitation; the sub-agent's siblings run on. A call that ends first (its sub-agent
        was stopped) leaves the approval cancelled."""
        request = self.approval_request(call, verdict)
        question = await db(asking.ask_for_subagent)(context.lease, call, request)
        parent_id, key = question.conversation_id, question.tool_call_id
        try:
            async with events.subscribe(events.conversation_group(parent_id)) as changes:
                while (decided := await db(approvals.decision_for)(parent_id, key)) is None:
                    await changes.wait(ELICITATION_POLL_SECONDS)
        finally:
            await asyncio.shield(db(resolving.end_running_request)(parent_id, key))
        return decided

    async def call(
        self,
        call: ToolCallBlock,
        context: ToolContext,
        arguments: dict,
        *,
        edited: bool,
        votes: tuple[str, ...] = (),
    ) -> ToolResultBlock:
        """Make the call, at most once for this tool call id; the model's result says who
        allowed it when several people had to (`votes`)."""
        conversation_id = context.conversation_id
        in_flight = Call(lease=context.lease, call=call, tool=self.tool.name)
        resume = None
        if not await db(ToolRun.start)(conversation_id, call.id, self.name):
            # Started by a runner that stopped: go on from the round it waited in, if any.
            resume = await inputs.resumed(in_flight)
            if resume is None:
                for key in await db(selectors.pending_elicitation_keys)(conversation_id, call.id):
                    await db(resolving.end_running_request)(conversation_id, key)
                return ToolResultBlock.error(call.id, INTERRUPTED)
        prefix = (
            EDITED.format(arguments=json.dumps(arguments, ensure_ascii=False)) if edited else ""
        )
        if votes:
            prefix = VOTED.format(people=", ".join(votes)) + prefix
        answer = functools.partial(inputs.answer, in_flight, self.server.name)
        user_id = await db(signin.turn_user_id)(conversation_id) if self.config.per_user else None
        try:
            result = await self.server.call_tool(
                in_flight, arguments, answer=answer, resume=resume, user_id=user_id
            )
        except signin.NotSignedIn as error:
            return ToolResultBlock.error(call.id, prefix + self.not_signed_in(error.why))
        except inputs.Interrupted:
            return ToolResultBlock.error(call.id, prefix + INTERRUPTED)
        except ConnectionError as error:
            text = NOT_CONNECTED.format(server=self.server.name, error=error)
            return ToolResultBlock.error(call.id, prefix + text)
        except TimeoutError:
            seconds = self.config.spec.timeout
            return ToolResultBlock.error(
                call.id, prefix + TIMED_OUT.format(tool=self.name, seconds=seconds)
            )
        except Exception as error:
            text = FAILED.format(server=self.server.name, tool=self.tool.name, error=error)
            return ToolResultBlock.error(call.id, prefix + text[:MAX_SHOWN_CHARS])
        return ToolResultBlock(
            tool_call_id=call.id, content=prefix + result_text(result), is_error=result.is_error
        )


def refusal(call: ToolCallBlock, decided: approvals.Decided) -> ToolResultBlock | None:
    """What the model reads of a call its approval did not let run; None if it runs."""
    if decided.rule is not None and decided.decision == DENIED_DECISION:
        return ToolResultBlock.error(call.id, RULE_DENIED)
    if decided.stopped_by is not None:
        stopped = decided.stopped_by
        feedback = FEEDBACK.format(feedback=stopped.feedback) if stopped.feedback else ""
        return ToolResultBlock.error(call.id, STEP_STOPPED.format(title=stopped.title) + feedback)
    if decided.status == QuestionStatus.EXPIRED:
        return ToolResultBlock.error(call.id, EXPIRED)
    if decided.status == QuestionStatus.CANCELLED:
        return ToolResultBlock.error(call.id, CANCELLED)
    if decided.decision == DENIED_DECISION or decided.status == QuestionStatus.REJECTED:
        feedback = FEEDBACK.format(feedback=decided.feedback) if decided.feedback else ""
        return ToolResultBlock.error(call.id, DENIED + feedback)
    return None


def result_text(result: types.CallToolResult) -> str:
    """A tool's result as the model reads it: its text, a line for each other kind of
    content, the structured result when there is no text; cut to MAX_RESULT_CHARS, saying so."""
    parts = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{block.type} content ({getattr(block, 'mime_type', '')}), not shown]")
    if not any(parts) and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        kept = MAX_RESULT_CHARS - 100
        text = text[:kept] + CUT.format(kept=kept, total=len(text))
    return text


def _approvals_to_ask(
    lease: turns.Lease, call: ToolCallBlock, verdict
) -> list[tuple[ToolCallBlock, ApprovalRequest]]:
    """This call's approval (the rules' `verdict` made it ask), and those of the calls after
    it in its step that need one too: asked together, decided one by one."""
    calls = turns.pending_tool_calls(lease)
    start = next((i for i, c in enumerate(calls) if c.id == call.id), 0)
    asks = []
    for later in calls[start:]:
        tool = tools.offered(later.name)
        if not isinstance(tool, McpTool):
            continue
        # A later call asks with this one if the rules would make it ask now (spending no
        # use: its own run decides again).
        later_verdict = verdict
        if later.id != call.id:
            later_verdict = tool.verdict(lease.conversation_id, later, spend=False)
            if (
                later_verdict.effect != ASK
                or approvals.decision_for(lease.conversation_id, later.id) is not None
            ):
                continue
        asks.append((later, tool.approval_request(later, later_verdict)))
    return asks


# --- Elicitation -------------------------------------------------------------------------------

ELICITATION_POLL_SECONDS = 2.0


async def elicit(call: Call, server: str, params: Any) -> types.ElicitResult:
    """A running tool asks the person: show the request in the call's conversation, wait for
    the answer (or its deadline, or the call's end), and send it back."""
    request = inputs.request_for(call, server, params)
    if request is None:  # a URL never shown: not http(s), credentials, hidden characters
        return types.ElicitResult(action="decline")
    mode = request.mode
    conversation_id = call.lease.conversation_id
    key = f"elicit_{uuid.uuid4().hex[:24]}"
    await db(asking.ask_elicitation)(call.lease, call.call, request, key=key)
    try:
        async with events.subscribe(events.conversation_group(conversation_id)) as changes:
            while True:
                outcome = await db(selectors.elicitation_outcome)(conversation_id, key)
                if outcome is not None:
                    action, content = outcome
                    accepted = action == "accept" and mode == "form"
                    return types.ElicitResult(action=action, content=content if accepted else None)
                await changes.wait(ELICITATION_POLL_SECONDS)
    finally:
        # The call ended first (it failed, timed out, or the turn was stopped): the request
        # can no longer be answered.
        await asyncio.shield(db(resolving.end_running_request)(conversation_id, key))


# --- The connections of this process -----------------------------------------------------------

_connections: dict[asyncio.AbstractEventLoop, Connections] = {}


def _sync_registry(connections: Connections) -> None:
    """Offer exactly the tools the servers list now."""
    current = {}
    for server in connections.servers.values():
        for tool in server.tools.values():
            wrapped = McpTool(server, tool)
            current[wrapped.name] = wrapped
    for tool in tools.all_registered():
        if isinstance(tool, McpTool) and tool.name not in current:
            tools.unregister(tool.name)
    for tool in current.values():
        tools.register(tool)
    from mcp_client import status

    status.publish(connections)


async def connect() -> None:
    """Connect this event loop to the servers once, and wait for their first attempt."""
    loop = asyncio.get_running_loop()
    connections = _connections.get(loop)
    if connections is None:
        for stale in [other for other in _connections if other.is_closed()]:
            del _connections[stale]
        connections = _connections[loop] = Connections(elicit, _sync_registry)
        from mcp_client import status

        status.publish(connections)
    await connections.ready()


def connections_here() -> Connections | None:
    try:
        return _connections.get(asyncio.get_running_loop())
    except RuntimeError:
        return None
