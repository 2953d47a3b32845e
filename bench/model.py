"""The benchmark's model: a local OpenAI-compatible chat completions server that answers at once.

Stateless, so any number of Parley processes can share it. What it answers depends on the
request's last message:
- the user's message `stream <N>`: a reply of N characters, streamed word by word at `pace`
  words per second (0: as fast as the socket takes them);
- any other user message: one line of text and a `question` tool call with two options;
- the user's message `call <tool> <JSON arguments>`: one line of text and that tool call;
- any other user message: one line of text and a `question` tool call with two options;
- a tool result (the user answered, or the tool ran): the follow-up text `FOLLOW_UP`, then
  the turn ends.
"""

import functools
import importlib
import inspect
import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FOLLOW_UP = "Onward:"
ASK_TEXT = "One question first."
CALL_TEXT = "One tool first."
OPTIONS = ("Alpha", "Beta")
_ids = itertools.count(1)


# Standard-library modules whose documentation is the replies' prose.
PROSE_MODULES = ("collections", "functools", "itertools", "json", "os", "pathlib", "re", "string")


@functools.cache
def prose() -> str:
    """English prose, as compressible as a model's reply (a repeated phrase would flatter the
    websocket compression): the docstrings of some standard-library modules, one paragraph
    each, with a heading and some bold markdown."""
    paragraphs = []
    for name in PROSE_MODULES:
        module = importlib.import_module(name)
        paragraphs.append(f"## {name}")
        for attribute in sorted(vars(module)):
            doc = inspect.getdoc(getattr(module, attribute))
            if not attribute.startswith("_") and doc:
                paragraphs.append(f"**{attribute}**: " + " ".join(doc.split()))
    return "\n\n".join(dict.fromkeys(paragraphs))  # each docstring once


def reply_text(length: int) -> str:
    """Prose of exactly `length` characters (from its start; repeated if it is shorter)."""
    text = prose()
    return (text * (length // len(text) + 1))[:length]


def words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


class Model:
    def __init__(self, pace: float = 0.0) -> None:
        self.pace = pace
        handler = type("Handler", (_Handler,), {"model": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    data = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    model: Model
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as model servers set it: the headers and the first chunk are two small
    # writes, and with Nagle's algorithm the chunk waited for the client's delayed ACK of the
    # headers (~40 ms) in some runs and not in others, whatever Parley did.
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = body["messages"][-1]
        pace = 0.0
        call = None
        if last["role"] == "tool":
            text = f"{FOLLOW_UP} {last['content'].strip()}."
        elif m := re.fullmatch(r"stream (\d+)", (last.get("content") or "").strip()):
            text, pace = reply_text(int(m[1])), self.model.pace
        elif m := re.fullmatch(r"call (\S+) (\{.*\})", (last.get("content") or "").strip()):
            text = CALL_TEXT
            call = {"id": f"call{next(_ids)}", "name": m[1], "args": m[2]}
        else:
            text = ASK_TEXT
            arguments = {"question": "Which one?", "options": [{"label": o} for o in OPTIONS]}
            call = {"id": f"ask{next(_ids)}", "name": "question", "args": json.dumps(arguments)}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.send_chunk(_chunk({"role": "assistant", "content": ""}))
        for word in words(text):
            if pace:
                time.sleep(1 / pace)
            self.send_chunk(_chunk({"content": word}))
        if call:
            self.send_chunk(
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": call["args"]},
                            }
                        ]
                    }
                )
            )
        self.send_chunk(_chunk({}, "tool_calls" if call else "stop") + b"data: [DONE]\n\n")
        self.send_chunk(b"")

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
