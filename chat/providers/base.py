"""The provider interface: history in, a stream of events out.

A provider never touches the database. The runtime builds its history from stored blocks and
turns its events into writes, so every provider gets the same persistence and recovery.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from chat.blocks import Block


@dataclass(frozen=True)
class HistoryMessage:
    role: str
    blocks: list[Block]


@dataclass(frozen=True)
class TextDelta:
    """More assistant text."""

    text: str


@dataclass(frozen=True)
class ToolCallRequest:
    """The model wants a tool run."""

    id: str
    name: str
    arguments: dict[str, Any]


ProviderEvent = TextDelta | ToolCallRequest


class Provider(Protocol):
    name: str

    def stream(self, *, history: list[HistoryMessage]) -> AsyncIterator[ProviderEvent]:
        """Stream one assistant turn for `history` (oldest first)."""
        ...
