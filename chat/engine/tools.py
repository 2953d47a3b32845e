"""The one registry of tools the agent may call: plain ones (a function), pausing ones (they
may stop the turn until a person resolves them: the question tools), sub-agents.

Apps register their tools from `AppConfig.ready()`, so the engine runs tools it does not
know. A tool's input is validated by its pydantic model before it runs; anything wrong (an
unknown tool, bad arguments, a failure inside) becomes an error result the model can read.
"""

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from chat.blocks import ToolCallBlock, ToolResultBlock
from core.registry import Registry
from core.text import drop_invisible

if TYPE_CHECKING:
    from chat.engine.dispatch import Next
    from chat.engine.turns import Lease
    from chat.models import Conversation, Message
    from chat.transcript import Transcript

MAX_RESULT_CHARS = 20_000


@dataclass(frozen=True)
class ToolContext:
    """What a tool knows about the agent calling it."""

    lease: "Lease"
    is_subagent: bool = False

    @property
    def conversation_id(self) -> int:
        return self.lease.conversation_id


@dataclass(frozen=True)
class ToolSpec:
    """What a provider tells the model about a tool."""

    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class Refusal:
    """A call not run: `result` for the model, `error` (an English msgid) shown to the user,
    with `detail` in plain words."""

    result: str
    error: str
    detail: str = ""


class Paused:
    """The call paused the turn (it stored the pause itself): the turn waits for a person."""


PAUSED = Paused()

Outcome = ToolResultBlock | Refusal | Paused


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


@functools.cache
def json_schema(model: type[BaseModel]) -> dict:
    """A tool input's JSON schema for the model, made once per process (pydantic builds it
    anew on every call, and every step offers every tool). Read only."""
    return model.model_json_schema()


class Tool:
    """A tool. Subclasses set the class attributes and implement `run`."""

    name: str
    # How a person reads it on its call's card (default: its name), and where it comes from
    # (an MCP server's name; default: nowhere said).
    title: str = ""
    source: str = ""
    description: str
    input_model: type[BaseModel]
    # Offered to sub-agents? If not, what a sub-agent's call of it gets as its result.
    subagent_refusal: str | None = None
    # A pausing tool shows its call as an action block of this type (rendered by
    # `template_name`, with `block` and `conversation` in the context), not as a tool card.
    action_type: str | None = None
    template_name: str | None = None

    @property
    def pauses(self) -> bool:
        return self.action_type is not None

    def enabled(self) -> bool:
        """Whether the tool is offered at all (a setting may turn it off)."""
        return True

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, json_schema(self.input_model))

    async def run(self, call: ToolCallBlock, context: ToolContext) -> Outcome:
        raise NotImplementedError

    def refuse_batch(self, calls: list[ToolCallBlock]) -> Refusal | None:
        """A reason to run none of one model message's calls (this tool's among them)."""
        return None

    def resolve_by_message(
        self, transcript: "Transcript", call: ToolCallBlock, reply: "Message", user
    ) -> "Next | None":
        """`user` sent `reply` while this tool's `call` paused the turn: take it as the
        resolution, in the caller's transaction (the row is locked). Returns what should
        happen next, or None if the call stays open."""
        return None


class FunctionTool(Tool):
    """A tool that is a sync function of its validated input, run in a thread."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_model: type[ToolInput],
        function: Callable[[ToolInput, ToolContext], str],
    ) -> None:
        self.name = name
        self.description = description
        self.input_model = input_model
        self.function = function

    async def run(self, call: ToolCallBlock, context: ToolContext) -> Outcome:
        try:
            arguments = self.input_model.model_validate(call.arguments)
        except ValidationError as error:
            return ToolResultBlock.error(call.id, invalid_arguments(call.name, error))
        try:
            content = await asyncio.to_thread(self.function, arguments, context)
        except ToolError as error:
            return ToolResultBlock.error(call.id, str(error))
        except Exception as error:  # a tool's bug must not end the turn; the model is told
            return ToolResultBlock.error(call.id, f"{call.name} failed: {type(error).__name__}")
        return ToolResultBlock(tool_call_id=call.id, content=content[:MAX_RESULT_CHARS])


class ToolError(Exception):
    """A failure a tool reports to the model in words."""


def invalid_arguments(name: str, error: ValidationError) -> str:
    """What the model is told about arguments its input model refused."""
    details = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in error.errors()
    )
    return f"Invalid arguments for {name}: {details}"


# --- The registry ----------------------------------------------------------------------------

# Every tool by name, offered now or not (a call stored earlier names one).
registry: Registry[Tool] = Registry("tools")
# Awaited before each model request: apps whose tools come and go (MCP servers) bring the
# registry up to date there.
preparations: Registry[Callable[[], Awaitable[None]]] = Registry("tool preparations")


def register(tool: Tool) -> Tool:
    return registry.add(tool, key=tool.name)


def unregister(name: str) -> None:
    registry.remove(name)


def before_offering(prepare: Callable[[], Awaitable[None]]) -> None:
    """Have `prepare` awaited before the tools are offered to the model (`prepare()`)."""
    preparations.add(prepare)


async def prepare() -> None:
    for preparation in preparations:
        await preparation()


def registered(name: str) -> Tool | None:
    """The tool of this name, whether offered now or not (a call stored earlier)."""
    return registry.get(name)


def all_registered() -> list[Tool]:
    """Every registered tool, offered now or not."""
    return list(registry)


def offered(name: str) -> Tool | None:
    tool = registry.get(name)
    return tool if tool is not None and tool.enabled() else None


def specs(*, is_subagent: bool = False) -> list[ToolSpec]:
    """Every tool offered to the model (to a sub-agent: those it may call)."""
    return [
        tool.spec()
        for tool in registry
        if tool.enabled() and not (is_subagent and tool.subagent_refusal is not None)
    ]


def batch_refusal(calls: list[ToolCallBlock]) -> Refusal | None:
    """A reason to run none of one model message's calls, or None."""
    for call in calls:
        tool = offered(call.name)
        if tool is not None and (refusal := tool.refuse_batch(calls)) is not None:
            return refusal
    return None


async def run(call: ToolCallBlock, context: ToolContext) -> Outcome:
    """Run one call; never raises for the tool's own failures."""
    tool = offered(call.name)
    if tool is None:
        known = ", ".join(sorted(t.name for t in registry if t.enabled()))
        return ToolResultBlock.error(
            call.id, f"Unknown tool {call.name!r}. Available tools: {known}."
        )
    if context.is_subagent and tool.subagent_refusal is not None:
        return ToolResultBlock.error(call.id, tool.subagent_refusal)
    outcome = await tool.run(call, context)
    if isinstance(outcome, ToolResultBlock):  # what the tool wrote is shown, and read by the model
        return outcome.model_copy(update={"content": drop_invisible(outcome.content)})
    return outcome


# Ways a pause may be resolved by the user's message before its tool's own (an approval, which
# the process that gets the message may not have the tool of): each returns a Next or None.
message_resolvers: Registry[Callable] = Registry("pause resolvers")


def resolve_pauses_by_message(resolver: Callable) -> None:
    """`resolver(transcript, reply, user)` is asked first when the user sends a message while
    the turn is paused (chat.services); it returns what happens next, or None."""
    message_resolvers.add(resolver)


# Action blocks that no one tool shows (an approval before any tool runs): their templates.
action_templates: Registry[str] = Registry("action block templates")


def register_action(action_type: str, template_name: str) -> None:
    """Have action blocks of `action_type` rendered by `template_name` (as a pausing tool's
    are by its own), with `block` and `conversation` in the context."""
    action_templates.add(template_name, key=action_type)


def template_for_action(action_type: str) -> str | None:
    """The template of an action block's type (None if none is registered)."""
    if (template := action_templates.get(action_type)) is not None:
        return template
    return next((t.template_name for t in registry if t.action_type == action_type), None)


# What names the messages whose waiting cards show state the transcript does not hold (whom a
# question waits for, who may answer it): each returns their ids, for a paused conversation.
live_cards: Registry[Callable[["Conversation"], list[int]]] = Registry("live cards")


def register_live_cards(finder: Callable[["Conversation"], list[int]]) -> None:
    """`finder(conversation)` names the messages of its waiting cards that render state kept
    outside the transcript, which changes with no write to the messages (core.events.refresh):
    a page that reconnects renders them again (chat.live.consumers)."""
    live_cards.add(finder)


def live_card_messages(conversation: "Conversation") -> list[int]:
    """The ids of the messages whose waiting cards render state outside the transcript."""
    return [message_id for finder in live_cards for message_id in finder(conversation)]


@dataclass(frozen=True)
class CallState:
    """What a tool call's card says while an action block of another app decides the call:
    `state` "waiting" (for the person's decision) or "denied"; the tool's `title` and
    `source` where that block knows them (a tool no longer offered)."""

    state: str
    title: str = ""
    source: str = ""


# Readers of one message's blocks that say what a call of it waits for (an approval): each
# returns a CallState for the call, or None.
call_states: Registry[Callable[[list, str], CallState | None]] = Registry("call states")


def register_call_state(reader: Callable[[list, str], CallState | None]) -> None:
    """`reader(blocks, call_id)` reads a message's parsed blocks for what decides its call
    `call_id` (chat/conversation.html shows it on the call's card)."""
    call_states.add(reader)


def call_state(blocks: list, call_id: str) -> CallState | None:
    """What decides the call `call_id` of the message holding `blocks`, if anything does."""
    for reader in call_states:
        if (state := reader(blocks, call_id)) is not None:
            return state
    return None
