"""Sub-agents: the `spawn_agents` tool, offered to top-level agents only.

Each task runs as an ordinary turn in a child conversation (`Conversation.parent`, linked to
the spawning tool call), whose first user message is the task: its own lease, its own step
limit, swept and resumed like any turn. Sub-agents are offered neither `spawn_agents` nor the
question tools; a call they make anyway gets an error result and they carry on. A sub-agent's
tool call that needs approval waits for it as it runs, the approval shown in the parent
(mcp_client.tools.McpTool.ask_in_parent): the sub-agent stays running, so the parent waits on.

The parent's turn stays in `tool_executing`, its runner holding the lease, until every child
finished, failed or was stopped; then the call's one result lists each child's final answer
(or error) in task order. The turn waits for agents, not for the person, so it stays running:
Stop ends it and its children, and a runner that dies is replaced by the sweep, which finds
the children already made (turns.spawn_subagents is idempotent) and waits again.
"""

import asyncio

from channels.db import database_sync_to_async
from pydantic import Field, ValidationError, field_validator

from chat.blocks import ToolCallBlock, ToolResultBlock
from chat.engine import dispatch, turns
from chat.engine.tools import (
    MAX_RESULT_CHARS,
    Outcome,
    Tool,
    ToolContext,
    ToolInput,
    invalid_arguments,
)
from chat.errors import TooManySubagents
from chat.models import Conversation
from chat.selectors import subagent_view
from core import events
from core.text import clean_text

db = database_sync_to_async

TOOL_NAME = "spawn_agents"
MAX_TASKS = 4
MAX_TASK_CHARS = 4000
MAX_TITLE_CHARS = 80
# How often, at least, the parent's runner looks whether its children are done.
RECHECK_SECONDS = 1.0


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


class SpawnAgents(Tool):
    name = TOOL_NAME
    description = (
        "Start 1-4 sub-agents that work on independent tasks at the same time, and wait for "
        "all of them. Each sub-agent sees only its task (write it self-contained), can use the "
        "other tools (a call that needs the user's approval waits for it), cannot ask the "
        "user questions, and reports back one final answer. The "
        "result lists each sub-agent's answer (or error) in task order."
    )
    input_model = SpawnAgentsInput
    subagent_refusal = "Sub-agents cannot start sub-agents; do the task yourself."

    async def run(self, call: ToolCallBlock, context: ToolContext) -> Outcome:
        """Start the children (once) and wait until none of them runs."""
        try:
            arguments = SpawnAgentsInput.model_validate(call.arguments)
        except ValidationError as error:
            return ToolResultBlock.error(call.id, invalid_arguments(TOOL_NAME, error))
        tasks = [(task.title, task.task) for task in arguments.tasks]
        lease = context.lease
        try:
            await db(_spawn)(lease, call, tasks)
        except TooManySubagents as refusal:
            return ToolResultBlock.error(call.id, str(refusal))
        # Every change of a child is announced to the parent's group: look again then, and
        # at least every RECHECK_SECONDS in case an event was lost.
        group = events.conversation_group(lease.conversation_id)
        async with events.subscribe(group) as changes:
            while (result := await db(outcome)(lease.conversation_id, call.id)) is None:
                if not await changes.wait(RECHECK_SECONDS) and changes.closed:
                    await asyncio.sleep(RECHECK_SECONDS)  # shutting down: the turn is cancelled
        return result


def _spawn(lease: turns.Lease, call: ToolCallBlock, tasks: list[tuple[str, str]]) -> None:
    dispatch.on_commit(turns.spawn_subagents(lease, call, tasks))


def outcome(parent_id: int, call_id: str) -> ToolResultBlock | None:
    """The call's result once none of its children runs any more; None while one does."""
    children = list(
        Conversation.objects.filter(parent_id=parent_id, parent_tool_call_id=call_id).order_by(
            "subagent_index"
        )
    )
    if not children or any(child.is_running for child in children):
        return None
    views = [subagent_view(child) for child in children]
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
