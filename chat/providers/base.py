"""The provider interface: history and tools in, a stream of events out.

A provider never touches the database. The runtime builds its history from stored blocks and
turns its events into writes, so every provider gets the same persistence and recovery.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from chat.blocks import Block
from chat.tools import ToolSpec


@dataclass(frozen=True)
class HistoryMessage:
    role: str  # user, assistant or tool
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


class ProviderError(Exception):
    """A provider request failed. Retryable ones (timeouts, 429, 5xx, a garbled stream) are
    tried again with backoff; the others end the turn at once."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def retryable_status(status: int) -> bool:
    """HTTP statuses worth another try: timeouts, conflicts, rate limits, server errors."""
    return status in (408, 409, 429) or status >= 500


class Provider(Protocol):
    name: str

    def stream(
        self, *, history: list[HistoryMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ProviderEvent]:
        """Stream one model response for `history` (oldest first)."""
        ...
