"""The provider interface: history and tools in, a stream of events out.

A provider never touches the database. The runtime builds its history from stored blocks and
turns its events into writes, so every provider gets the same persistence and recovery.
"""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from django.utils.translation import gettext_noop

from chat.blocks import Block
from chat.engine.tools import ToolSpec

# The longest reply a request asks of the model, in tokens: room kept for it in the context
# window (chat.engine.window).
REPLY_TOKENS = 4096


@dataclass(frozen=True)
class HistoryMessage:
    role: str  # user, assistant or tool
    blocks: list[Block]
    # The stored message it comes from (a call's results: the call's message), by its order.
    order: int = -1


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


# Why a reply failed, in words for the person (English msgids, translated when shown).
CAUSE_CREDENTIALS = gettext_noop(
    "The model provider refused Parley's credentials: check its API key and base URL."
)
CAUSE_RATE_LIMITED = gettext_noop("The model provider is rate limiting Parley: wait a little.")
CAUSE_TIMEOUT = gettext_noop("The model provider did not answer in time.")
CAUSE_UNREACHABLE = gettext_noop(
    "Parley could not reach the model provider (connection refused or no network)."
)
CAUSE_PROVIDER_ERROR = gettext_noop("The model provider had an error on its side.")
CAUSE_REJECTED = gettext_noop("The model provider rejected the request.")
CAUSE_UNREADABLE = gettext_noop("The model sent a reply Parley could not read.")


class ProviderError(Exception):
    """A provider request failed. Retryable ones (timeouts, 429, 5xx, a garbled stream) are
    tried again with backoff; the others end the turn at once. `cause` says why to people;
    the message (logged) has the technical detail."""

    def __init__(self, message: str, *, retryable: bool, cause: str = CAUSE_UNREADABLE) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.cause = cause


def retryable_status(status: int) -> bool:
    """HTTP statuses worth another try: timeouts, conflicts, rate limits, server errors."""
    return status in (408, 409, 429) or status >= 500


def status_cause(status: int) -> str:
    if status in (401, 403):
        return CAUSE_CREDENTIALS
    if status == 429:
        return CAUSE_RATE_LIMITED
    if status == 408:
        return CAUSE_TIMEOUT
    if status >= 500:
        return CAUSE_PROVIDER_ERROR
    return CAUSE_REJECTED


def connection_cause(error: Exception) -> str:
    return CAUSE_TIMEOUT if "timeout" in type(error).__name__.lower() else CAUSE_UNREACHABLE


class Provider(Protocol):
    name: str

    def stream(
        self, *, history: list[HistoryMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ProviderEvent]:
        """Stream one model response for `history` (oldest first)."""
        ...

    async def context_window(self) -> int | None:
        """The model's context window in tokens, if the provider's endpoint reports it."""
        ...


# Where endpoints that speak the OpenAI or Anthropic API report a model's window in its
# entry of their model list (vLLM, OpenRouter, Groq, LM Studio, Anthropic), none of them
# part of those APIs' own schemas.
WINDOW_FIELDS = ("max_model_len", "context_length", "context_window", "max_input_tokens")
# How long asking an endpoint for a model's window may take, once per provider.
WINDOW_TIMEOUT = 5.0


class ReportedWindow:
    """Provider.context_window for a provider whose SDK client lists models
    (`client.models.retrieve`), asked once; `sdk_error`: the SDK's base exception."""

    client: Any
    model: str
    sdk_error: type[Exception]
    _window: int | None
    _window_asked = False

    async def context_window(self) -> int | None:
        if not self._window_asked:
            self._window_asked = True
            self._window = None
            try:
                async with asyncio.timeout(WINDOW_TIMEOUT):
                    self._window = reported_window(await self.client.models.retrieve(self.model))
            except (self.sdk_error, TimeoutError):
                pass  # the official APIs' model entries do not say
        return self._window


def reported_window(model: object) -> int | None:
    """The context window in a model entry the SDK returned (its fields beyond the
    schema's are kept by pydantic as extras), or None."""
    extra = getattr(model, "model_extra", None) or {}
    for field in WINDOW_FIELDS:
        value = extra.get(field, getattr(model, field, None))
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
