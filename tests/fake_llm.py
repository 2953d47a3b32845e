"""Local fake LLM servers speaking the OpenAI and Anthropic streaming wire protocols.

Tests queue responses; the real SDKs talk to these over real HTTP, streaming included.
A response is a dict: {"status": 500} for an HTTP error, {"text": ..., "tool_calls":
[{"id", "name", "arguments": raw JSON string}]} for a streamed answer, or (OpenAI's protocol)
{"chunks": [...]} for these streamed chunks' JSON as they are.
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLM:
    def __init__(self) -> None:
        self.responses: list[dict] = []
        self.requests: list[dict] = []
        # GET /models/<id> (both SDKs' models.retrieve): extra fields of a model's entry, as
        # endpoints such as vLLM add them; unknown models are a 404.
        self.models: dict[str, dict] = {}
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def queue(self, *responses: dict) -> None:
        self.responses.extend(responses)

    def respond(self, body: dict) -> dict:
        """The response to a request: the next one queued (a subclass may read `body`)."""
        return self.responses.pop(0) if self.responses else {"text": "ok"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        if "/models/" not in self.path or name not in self.fake.models:
            self._json(404, {"error": {"message": "no such model", "type": "not_found"}})
            return
        entry = {"id": name, "object": "model", "created": 0, "owned_by": "fake"}
        self._json(200, {**entry, "type": "model", **self.fake.models[name]})

    def _json(self, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.fake.requests.append({"path": self.path, "body": body, "headers": headers})
        response = self.fake.respond(body)
        # Claude Code asks /v1/messages?beta=true.
        anthropic = self.path.split("?", 1)[0].endswith("/messages")
        if "status" in response:
            error = (
                {"type": "error", "error": {"type": "api_error", "message": "fake failure"}}
                if anthropic
                else {"error": {"message": "fake failure", "type": "server_error"}}
            )
            payload = json.dumps(error).encode()
            self.send_response(response["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        events = self.anthropic_events(response) if anthropic else self.openai_events(response)
        for event in events:
            self.wfile.write(event.encode())
            self.wfile.flush()
        self.close_connection = True

    @staticmethod
    def openai_events(response: dict) -> list[str]:
        def chunk(delta: dict, finish: str | None = None) -> str:
            data = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(data)}\n\n"

        if "chunks" in response:
            return [f"data: {json.dumps(c)}\n\n" for c in response["chunks"]] + ["data: [DONE]\n\n"]
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": word}) for word in _words(response.get("text", ""))]
        for index, call in enumerate(response.get("tool_calls", [])):
            raw = call["arguments"]
            half = len(raw) // 2
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": raw[:half]},
                            }
                        ]
                    }
                )
            )
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[half:]}}]})
            )
        finish = "tool_calls" if response.get("tool_calls") else "stop"
        events.append(chunk({}, finish))
        events.append("data: [DONE]\n\n")
        return events

    @staticmethod
    def anthropic_events(response: dict) -> list[str]:
        def event(kind: str, data: dict) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "fake-model",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        events = [event("message_start", {"message": message})]
        index = 0
        if response.get("text"):
            events.append(
                event(
                    "content_block_start",
                    {"index": 0, "content_block": {"type": "text", "text": ""}},
                )
            )
            for word in _words(response["text"]):
                events.append(
                    event(
                        "content_block_delta",
                        {"index": 0, "delta": {"type": "text_delta", "text": word}},
                    )
                )
            events.append(event("content_block_stop", {"index": 0}))
            index = 1
        for offset, call in enumerate(response.get("tool_calls", [])):
            i = index + offset
            block = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}
            events.append(event("content_block_start", {"index": i, "content_block": block}))
            raw = call["arguments"]
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": part}
                events.append(event("content_block_delta", {"index": i, "delta": delta}))
            events.append(event("content_block_stop", {"index": i}))
        stop = "tool_use" if response.get("tool_calls") else "end_turn"
        events.append(
            event(
                "message_delta",
                {
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 2},
                },
            )
        )
        events.append(event("message_stop", {}))
        return events


class FakeResponses:
    """A fake OpenAI Responses API (`POST /v1/responses`, streamed), as Codex speaks it: the
    first request that offers `tool` answers with one call of it (`arguments`), every other
    with the text "done". `requests` holds each request's body."""

    def __init__(self, tool: str, arguments: dict) -> None:
        self.tool = tool
        self.arguments = arguments
        self.called = False
        self.requests: list[dict] = []
        self.result_came = threading.Event()
        handler = type("Handler", (_ResponsesHandler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def outputs(self) -> list[dict]:
        """The function_call_output items the client sent back."""
        return [
            item
            for body in self.requests
            for item in body.get("input", [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _ResponsesHandler(BaseHTTPRequestHandler):
    fake: FakeResponses
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        payload = json.dumps({"models": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        fake = self.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fake.requests.append(body)
        if fake.outputs():
            fake.result_came.set()
        number = len(fake.requests)
        usage = {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        response = {
            "id": f"resp_{number}",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "fake-model",
            "output": [],
            "usage": usage,
        }
        offered = [tool.get("name") for tool in body.get("tools") or []]
        if fake.tool in offered and not fake.called:
            fake.called = True
            item = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": fake.tool,
                "arguments": json.dumps(fake.arguments),
                "status": "completed",
            }
            added = {**item, "arguments": ""}
        else:
            text = {"type": "output_text", "text": "done", "annotations": []}
            item = {
                "type": "message",
                "id": f"msg_{number}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
            added = {**item, "content": []}
        events = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            {"type": "response.output_item.added", "output_index": 0, "item": added},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True
