"""Message blocks: one pydantic discriminated union on `type`, validated at every boundary.

Writers build the typed models below. Readers go through `parse_blocks`, which never fails: a
stored block of a type this version does not know (or one that no longer validates) becomes a
`GenericBlock` that renders its text, so an odd row can never break a page.
"""

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _flag():
    """An optional marker, stored only when set (older rows simply lack it)."""
    return Field(default=False, exclude_if=lambda value: not value)


class TextBlock(_Block):
    """Prose: markdown from the assistant, plain text from the user."""

    type: Literal["text"] = "text"
    text: str
    # Shown by another block (the action block of the call it answers), not again on its own.
    shown_elsewhere: bool = _flag()


class ToolCallBlock(_Block):
    """The model asked to run a tool."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any]


class ToolResultBlock(_Block):
    """What a tool call returned; exactly one per tool call."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str
    is_error: bool = False
    # The user message that was the reply to a pausing call: the model reads that message
    # once, as this result, so the model's history leaves the message itself out.
    reply_message_id: int | None = Field(default=None, exclude_if=lambda value: value is None)
    # Shown by another block (the call's action block, or an error card), not as a result card.
    shown_elsewhere: bool = _flag()

    @classmethod
    def error(cls, tool_call_id: str, content: str) -> "ToolResultBlock":
        return cls(tool_call_id=tool_call_id, content=content, is_error=True)


class ActionBlock(_Block):
    """An interactive request to the user, such as a question. Its `extra` belongs to the app
    that registered the action type (chat.engine.tools), which reads and renders it."""

    type: Literal["action"] = "action"
    action_type: str
    status: str
    extra: dict[str, Any] = {}

    @property
    def display_text(self) -> str:
        """For an action this version cannot show: its own text, or what it is."""
        for key in ("text", "message"):
            if isinstance(self.extra.get(key), str) and self.extra[key]:
                return self.extra[key]
        return f"{self.action_type} ({self.status})"


class ErrorBlock(_Block):
    """Something went wrong that the user should see."""

    type: Literal["error"] = "error"
    message: str  # an English msgid, translated when shown
    detail: str = ""  # the cause in plain words, shown as is
    retryable: bool = False
    # A later attempt (Retry) took this failure's place: its card is no longer shown.
    superseded: bool = _flag()


class NoticeBlock(_Block):
    """A line from Parley about the conversation itself, such as why the agent stopped."""

    type: Literal["notice"] = "notice"
    message: str  # an English msgid, translated when shown


class GenericBlock(BaseModel):
    """Any block this version cannot read; kept verbatim and shown as text."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str = "unknown"

    @property
    def display_text(self) -> str:
        data = self.model_dump()
        for key in ("text", "content", "message"):
            if isinstance(data.get(key), str):
                return data[key]
        return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)


KNOWN_TYPES = frozenset({"text", "tool_call", "tool_result", "action", "error", "notice"})


def _tag(value: Any) -> str:
    block_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return block_type if block_type in KNOWN_TYPES else "generic"


Block = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ToolCallBlock, Tag("tool_call")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ActionBlock, Tag("action")]
    | Annotated[ErrorBlock, Tag("error")]
    | Annotated[NoticeBlock, Tag("notice")]
    | Annotated[GenericBlock, Tag("generic")],
    Discriminator(_tag),
]

_block_adapter: TypeAdapter[Block] = TypeAdapter(Block)


def parse_blocks(raw: Any) -> list[Block]:
    """Read stored blocks leniently: anything unreadable becomes a GenericBlock."""
    if not isinstance(raw, list):
        raw = [raw]
    blocks: list[Block] = []
    for item in raw:
        try:
            blocks.append(_block_adapter.validate_python(item))
        except ValidationError:
            data = item if isinstance(item, dict) else {"text": str(item)}
            block_type = data.get("type")
            blocks.append(
                GenericBlock(
                    **{**data, "type": block_type if isinstance(block_type, str) else "unknown"}
                )
            )
    return blocks


def dump_blocks(blocks: list[Block]) -> list[dict[str, Any]]:
    """The JSON to store for typed blocks."""
    return [block.model_dump(mode="json") for block in blocks]


def searchable_text(blocks: list[Block]) -> str:
    """What a search of the transcript finds in a message: its text, as the people wrote it."""
    return "\n".join(block.text for block in blocks if isinstance(block, TextBlock) and block.text)
