"""Pausing tools: tool calls that may stop the turn until a person resolves them.

Chat knows only this interface. An app that has such tools (questions/) registers one handler
from its `AppConfig.ready()`; the runtime asks the registry what to offer the model, whether a
batch of calls must be refused, and how to run each call, and the services ask it to resolve a
pause when the person sends an ordinary message instead.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from chat.blocks import ToolCallBlock

if TYPE_CHECKING:
    from chat.models import Conversation, Message
    from chat.tools import AgentContext, ToolSpec
    from chat.turns import Lease


@dataclass(frozen=True)
class Refusal:
    """Why a batch of calls is not run: `result` for the model, `error` (an English msgid)
    shown to the user."""

    result: str
    error: str


class PausingToolHandler(Protocol):
    # The ActionBlock type this handler shows, and the template that renders one such block
    # (with `block` and `conversation` in its context).
    action_type: str
    template_name: str

    def handles(self, name: str) -> bool:
        """Whether a call of the tool `name` is this handler's to run."""

    def specs(self, context: "AgentContext") -> list["ToolSpec"]:
        """The tools offered to the model in this context."""

    def refuse_batch(self, calls: list[ToolCallBlock]) -> Refusal | None:
        """A reason to run none of one model message's calls, or None."""

    async def run(self, lease: "Lease", call: ToolCallBlock, context: "AgentContext") -> bool:
        """Handle one call: store its result or pause the turn. True if the turn paused."""

    def resolve_by_message(self, conversation: "Conversation", reply: "Message") -> bool:
        """The person sent `reply` while the turn was paused: take it as the resolution.
        The caller holds the conversation's row lock. True if a pause was resolved."""


_handlers: list[PausingToolHandler] = []


def register(handler: PausingToolHandler) -> None:
    if handler not in _handlers:
        _handlers.append(handler)


def handler_for(name: str) -> PausingToolHandler | None:
    return next((h for h in _handlers if h.handles(name)), None)


def specs(context: "AgentContext") -> list["ToolSpec"]:
    return [spec for handler in _handlers for spec in handler.specs(context)]


def refusal(calls: list[ToolCallBlock]) -> Refusal | None:
    for handler in _handlers:
        if (reason := handler.refuse_batch(calls)) is not None:
            return reason
    return None


def resolve_by_message(conversation: "Conversation", reply: "Message") -> bool:
    return any(handler.resolve_by_message(conversation, reply) for handler in _handlers)


def template_for_action(action_type: str) -> str | None:
    return next((h.template_name for h in _handlers if h.action_type == action_type), None)
