"""Any OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, LM Studio,
OpenRouter, ...), through the official `openai` SDK, streaming text and tool calls."""

import json
import uuid
from collections.abc import AsyncIterator

import openai
from openai.types.chat import ChatCompletion

from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.engine.providers.base import (
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


def to_openai_messages(system: str, history: list[HistoryMessage]) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    for message in history:
        text = "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        if message.role == "user":
            messages.append({"role": "user", "content": text})
        elif message.role == "assistant":
            entry: dict = {"role": "assistant", "content": text or None}
            calls = [b for b in message.blocks if isinstance(b, ToolCallBlock)]
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in calls
                ]
            messages.append(entry)
        elif message.role == "tool":
            messages.extend(
                {"role": "tool", "tool_call_id": b.tool_call_id, "content": b.content}
                for b in message.blocks
                if isinstance(b, ToolResultBlock)
            )
    return messages


def parse_arguments(raw: str) -> dict:
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError:
        raise ProviderError("The model sent malformed tool-call JSON.", retryable=True) from None
    if not isinstance(arguments, dict):
        raise ProviderError("The model's tool-call arguments are not an object.", retryable=True)
    return arguments


def chunk_parts(chunk: object) -> tuple[str, list[tuple[int, str, str, str]]]:
    """A streamed chunk's text and its tool-call parts (index, id, name, arguments), from
    its JSON (the SDK's ChatCompletionChunk, read without building the model). A chunk of
    another shape is the model's error, retried like malformed tool-call JSON."""
    try:
        choices = chunk.get("choices")  # not a JSON object: AttributeError
        if not choices:
            return "", []  # e.g. the usage at the end
        delta = choices[0].get("delta") or {}
        content = delta.get("content") or ""
        parts = [
            (
                part.get("index", 0),
                part.get("id") or "",
                (part.get("function") or {}).get("name") or "",
                (part.get("function") or {}).get("arguments") or "",
            )
            for part in delta.get("tool_calls") or ()
        ]
        if isinstance(content, str) and all(
            type(index) is int and all(isinstance(text, str) for text in texts)
            for index, *texts in parts
        ):
            return content, parts
    except (AttributeError, IndexError, KeyError, TypeError):
        pass
    raise ProviderError("The model sent a malformed stream chunk.", retryable=True)


class OpenAIProvider(ReportedWindow):
    name = "openai"
    sdk_error = openai.OpenAIError

    def __init__(self, *, model: str, base_url: str, api_key: str, system: str, timeout: float):
        self.model = model or "gpt-4o-mini"
        self.system = system
        # Retries are the runtime's (one policy for every provider), so the SDK makes none.
        self.client = openai.AsyncOpenAI(
            base_url=base_url or None,
            api_key=api_key or "unused",
            max_retries=0,
            timeout=timeout,
        )

    async def post(self, request: dict) -> openai.AsyncStream[object]:
        """What `client.chat.completions.create(**request)` does, less two steps. It walks
        the whole request against the SDK's TypedDicts (every node of every tool's JSON
        schema, a third of the call's CPU, ~3 ms a request on a 2-core machine) to rename
        fields, and ours are already the wire format. And it builds a ChatCompletionChunk
        model of each streamed chunk (~80 us each, a long reply's thousands of them): the
        stream gives each chunk's JSON as it came, read by `chunk_parts`. The rest (auth,
        errors, SSE parsing, errors sent in the stream) is the SDK's own, through its
        documented `post` for requests it has no method for."""
        return await self.client.post(
            "/chat/completions",
            body=request,
            cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )

    async def stream(
        self, *, history: list[HistoryMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[ProviderEvent]:
        request: dict = {
            "model": self.model,
            "messages": to_openai_messages(self.system, history),
            "stream": True,
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        calls: dict[int, dict[str, str]] = {}
        try:
            stream = await self.post(request)
            try:
                async for chunk in stream:
                    content, parts = chunk_parts(chunk)
                    if content:
                        yield TextDelta(content)
                    for index, call_id, name, arguments in parts:
                        slot = calls.setdefault(index, {"id": "", "name": "", "args": ""})
                        slot["id"] = call_id or slot["id"]
                        slot["name"] += name
                        slot["args"] += arguments
            finally:
                await stream.close()
        except openai.APIStatusError as error:
            retryable = retryable_status(error.status_code)
            message = f"HTTP {error.status_code}: {error.message}"
            cause = status_cause(error.status_code)
            raise ProviderError(message, retryable=retryable, cause=cause) from error
        except openai.APIConnectionError as error:  # includes timeouts
            message = f"{type(error).__name__}: {error}"
            cause = connection_cause(error)
            raise ProviderError(message, retryable=True, cause=cause) from error
        for index in sorted(calls):
            slot = calls[index]
            if not slot["name"]:
                raise ProviderError("The model sent a tool call without a name.", retryable=True)
            yield ToolCallRequest(
                id=slot["id"] or f"call_{uuid.uuid4().hex[:24]}",
                name=slot["name"],
                arguments=parse_arguments(slot["args"]),
            )
