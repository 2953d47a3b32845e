"""Anthropic's Messages API through the official `anthropic` SDK: streaming text, `tool_use`
and `tool_result`."""

from collections.abc import AsyncIterator

import anthropic

from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.engine.providers.base import (
    REPLY_TOKENS,
    HistoryMessage,
    ProviderError,
    ProviderEvent,
    ReportedWindow,
    TextDelta,
    ToolCallRequest,
    connection_cause,
    retryable_status,
    status_cause,
)
from chat.engine.tools import ToolSpec


def to_anthropic_messages(history: list[HistoryMessage]) -> list[dict]:
    """Messages alternate user/assistant; tool results travel in the user's turn, first."""
    messages: list[dict] = []
    for message in history:
        content: list[dict] = []
        if message.role == "tool":
            role = "user"
            content = [
                {
                    "type": "tool_result",
                    "tool_use_id": b.tool_call_id,
                    "content": b.content,
                    "is_error": b.is_error,
                }
                for b in message.blocks
                if isinstance(b, ToolResultBlock)
            ]
        else:
            role = "assistant" if message.role == "assistant" else "user"
            for block in message.blocks:
                if isinstance(block, TextBlock) and block.text:
                    content.append({"type": "text", "text": block.text})
                elif isinstance(block, ToolCallBlock):
                    content.append(
                        {
                            "type": "tool_use",
                            "id": block.id,
                            "name": block.name,
                            "input": block.arguments,
                        }
                    )
        if not content:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": role, "content": content})
    return messages


class AnthropicProvider(ReportedWindow):
    name = "anthropic"
    sdk_error = anthropic.AnthropicError

    def __init__(self, *, model: str, base_url: str, api_key: str, system: str, timeout: float):
        self.model = model or "claude-sonnet-4-5"
        self.system = system
        self.client = anthropic.AsyncAnthropic(
            base_url=base_url or None,
            api_key=api_key or "unused",
            max_retries=0,
            timeout=timeout,
        )

    async def stream(
        self, *, history: list[HistoryMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ProviderEvent]:
        request: dict = {
            "model": self.model,
            "max_tokens": REPLY_TOKENS,
            "messages": to_anthropic_messages(history),
        }
        if self.system:
            request["system"] = self.system
        if tools:
            request["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        try:
            async with self.client.messages.stream(**request) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield TextDelta(event.text)
                final = await stream.get_final_message()
        except anthropic.APIStatusError as error:
            retryable = retryable_status(error.status_code)
            message = f"HTTP {error.status_code}: {error.message}"
            cause = status_cause(error.status_code)
            raise ProviderError(message, retryable=retryable, cause=cause) from error
        except anthropic.APIConnectionError as error:  # includes timeouts
            message = f"{type(error).__name__}: {error}"
            cause = connection_cause(error)
            raise ProviderError(message, retryable=True, cause=cause) from error
        except ValueError as error:  # a garbled stream, such as malformed tool input JSON
            raise ProviderError(f"Malformed response: {error}", retryable=True) from error
        for block in final.content:
            if block.type == "tool_use":
                if not isinstance(block.input, dict):
                    raise ProviderError("The model's tool input is not an object.", retryable=True)
                yield ToolCallRequest(id=block.id, name=block.name, arguments=dict(block.input))
