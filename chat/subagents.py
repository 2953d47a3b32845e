"""Sub-agents: the `spawn_agents` tool, offered to top-level agents only.

Each task runs as an ordinary turn in a child conversation (`Conversation.parent`, linked to
the spawning tool call), whose first user message is the task: its own lease, its own step
limit, swept and resumed like any turn. Sub-agents are offered neither `spawn_agents` nor the
pausing tools (they run with `AgentContext.is_subagent`); a call they make anyway gets an
error result and they carry on.

The parent's turn stays in `tool_executing`, its runner holding the lease, until every child
finished, failed or was stopped; then the call's one result lists each child's final answer
(or error) in task order. This is not a pausing tool (chat.pausing): the turn waits for
agents, not for the person, so it stays running: Stop ends it and its children, a new message
is refused as for any running turn, and a runner that dies is replaced by the sweep, which
finds the children already made (chat.turns.spawn_subagents is idempotent) and waits again.
"""

import asyncio
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.utils.translation import gettext_lazy as _
from pydantic import Field, ValidationError, field_validator

from chat import events, turns
from chat.blocks import ErrorBlock, TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.models import AgentState, Conversation, Message, Role
from chat.text import clean_text
from chat.tools import (
    MAX_RESULT_CHARS,
    AgentContext,
    ToolInput,
    ToolSpec,
    invalid_arguments,
    json_schema,
)

db = database_sync_to_async

TOOL_NAME = "spawn_agents"
MAX_TASKS = 4
MAX_TASK_CHARS = 4000
MAX_TITLE_CHARS = 80
# How often, at least, the parent's runner looks whether its children are done.
RECHECK_SECONDS = 1.0

SUBAGENT_RESULT = "Sub-agents cannot start sub-agents; do the task yourself."
DESCRIPTION = (
    "Start 1-4 sub-agents that work on independent tasks at the same time, and wait for all "
    "of them. Each sub-agent sees only its task (write it self-contained), can use the other "
    "tools, cannot ask the user anything, and reports back one final answer. The result lists "
    "each sub-agent's answer (or error) in task order."
)


class SubagentTask(ToolInput):
    task: str = Field(
        min_length=1,
        max_length=MAX_TASK_CHARS,
        description="The complete instruction for the sub-agent: its first and only message.",
    )
    title: str = Field("", max_length=MAX_TITLE_CHARS, description="A short title to show.")

    @field_validator("task")
    @classmethod
    def _clean_task(cls, value: str) -> str:
        value = clean_text(value, multiline=True)
        if not value:
            raise ValueError("the task is empty")
        return value

    @field_validator("title")
    @classmethod
    def _clean_title(cls, value: str) -> str:
        return clean_text(value)


class SpawnAgentsInput(ToolInput):
    tasks: list[SubagentTask] = Field(min_length=1, max_length=MAX_TASKS)


def specs(context: AgentContext) -> list[ToolSpec]:
    if context.is_subagent:
        return []
    return [ToolSpec(TOOL_NAME, DESCRIPTION, json_schema(SpawnAgentsInput))]


def handles(name: str) -> bool:
    return name == TOOL_NAME


async def run(lease: turns.Lease, call: ToolCallBlock, context: AgentContext) -> None:
    """Run one spawn_agents call to its single result; the lease fences every write."""
    if context.is_subagent:
        await db(turns.record_tool_result)(lease, ToolResultBlock.error(call.id, SUBAGENT_RESULT))
        return
    try:
        arguments = SpawnAgentsInput.model_validate(call.arguments)
    except ValidationError as error:
        invalid = ToolResultBlock.error(call.id, invalid_arguments(TOOL_NAME, error))
        await db(turns.record_tool_result)(lease, invalid)
        return
    tasks = [(task.title, task.task) for task in arguments.tasks]
    await db(turns.spawn_subagents)(lease, call, tasks)
    # Every change of a child is announced to the parent's group: look again then, and at
    # least every RECHECK_SECONDS in case an event was lost.
    async with events.subscribe(lease.conversation_id) as changes:
        while (result := await db(outcome)(lease.conversation_id, call.id)) is None:
            if not await changes.wait(RECHECK_SECONDS) and changes.closed:
                await asyncio.sleep(RECHECK_SECONDS)  # shutting down: the runner is cancelled
    await db(turns.record_tool_result)(lease, result)


# --- Reading children ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Subagent:
    """A child conversation as its parent shows it."""

    conversation: Conversation
    status: str  # running, done, failed or stopped
    messages: list[Message]

    @property
    def pk(self) -> int:
        return self.conversation.pk

    @property
    def number(self) -> int:
        return self.conversation.subagent_index + 1

    @property
    def status_label(self) -> str:
        return str(STATUS_LABELS[self.status])

    @property
    def answer(self) -> str:
        """The last thing the sub-agent said (its final answer, once done)."""
        for message in reversed(self.messages):
            if message.role == Role.ASSISTANT and not message.is_draft:
                text = "\n".join(
                    b.text for b in parse_blocks(message.blocks) if isinstance(b, TextBlock)
                ).strip()
                if text:
                    return text
        return ""

    @property
    def error(self) -> str:
        for message in reversed(self.messages):
            for block in parse_blocks(message.blocks):
                if isinstance(block, ErrorBlock):
                    return block.message
        return ""


STATUS_LABELS = {
    "running": _("Working…"),
    "done": _("Done"),
    "failed": _("Failed"),
    "stopped": _("Stopped"),
}


def _status(child: Conversation, messages: list[Message]) -> str:
    if child.is_running:
        return "running"
    if child.agent_state == AgentState.IDLE:
        return "done"
    last = messages[-1] if messages else None
    if last is not None and any(
        isinstance(b, ErrorBlock) and b.message == turns.SUBAGENT_STOPPED
        for b in parse_blocks(last.blocks)
    ):
        return "stopped"
    return "failed"


def _view(child: Conversation) -> Subagent:
    messages = list(child.messages.order_by("order"))
    return Subagent(child, _status(child, messages), messages)


def subagents_of(parent: Conversation, call_id: str | None = None) -> list[Subagent]:
    """The children of `parent` (those of one call, with `call_id`), in spawn order. The
    caller has checked the user may read `parent`."""
    children = parent.children.order_by("pk")
    if call_id is not None:
        children = children.filter(parent_tool_call_id=call_id).order_by("subagent_index")
    return [_view(child) for child in children]


def changed_subagents(parent: Conversation, known: dict[int, int]) -> list[Subagent]:
    """Children changed since the change cursors in `known` (child id -> seq; an unknown
    child counts as changed)."""
    return [
        _view(child)
        for child in parent.children.order_by("pk")
        if child.seq > known.get(child.pk, -1)
    ]


def outcome(parent_id: int, call_id: str) -> ToolResultBlock | None:
    """The call's result once none of its children runs any more; None while one does."""
    children = list(
        Conversation.objects.filter(parent_id=parent_id, parent_tool_call_id=call_id).order_by(
            "subagent_index"
        )
    )
    if not children or any(child.is_running for child in children):
        return None
    views = [_view(child) for child in children]
    parts = []
    for view in views:
        title = f" ({view.conversation.title})" if view.conversation.title else ""
        if view.status == "done":
            body = view.answer or "(It finished without an answer.)"
            parts.append(f"Sub-agent {view.number}{title} finished:\n{body}")
        else:
            error = view.error or "unknown error"
            parts.append(f"Sub-agent {view.number}{title} {view.status}: {error}")
    return ToolResultBlock(
        tool_call_id=call_id,
        content="\n\n".join(parts)[:MAX_RESULT_CHARS],
        is_error=all(view.status != "done" for view in views),
    )
