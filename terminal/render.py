"""What the client prints, as terminal text: the screen it writes to, a reply as it streams,
a transcript's messages, tool calls and results, approvals and questions.

Only text from `terminal.text` reaches the screen; links in markdown are printed with their
address (`hyperlinks=False`).
"""

import json
import sys
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown

from terminal.api import APPROVAL, ELICITATION, TOOL_REQUESTS
from terminal.text import shown, shown_line

RESULT_PREVIEW_CHARS = 200
DESCRIPTION_CHARS = 300
# Messages shown when a conversation opens: the newest of those the server returns with it.
HISTORY = 20


class Output(Protocol):
    """A stream that writes a line (Django's `OutputWrapper`): `ending` is added unless the
    text ends with it."""

    def write(self, msg: str = "", style_func=None, ending: str = "\n") -> None: ...

    def flush(self) -> None: ...


@dataclass(frozen=True)
class Screen:
    """Where the client writes; `interactive` when input and output are both a terminal."""

    out: Output
    err: Output
    interactive: bool
    console: Console

    @classmethod
    def of(cls, out: Output, err: Output) -> "Screen":
        return cls(
            out,
            err,
            interactive=sys.stdin.isatty() and sys.stdout.isatty(),
            console=Console(highlight=False, emoji=False, markup=False),
        )


def shortened(text: str, limit: int) -> str:
    return text[: limit - 1] + "…" if len(text) > limit else text


class Reply:
    """The assistant's text as it streams: markdown re-rendered in place in a terminal, plain
    text appended in a pipe. A message's text is shown once: after something else was printed
    (a tool call), only the text that came since follows, under no second "parley:"."""

    def __init__(self, screen: Screen, known: dict[int, str]) -> None:
        self.screen = screen
        self.printed = known
        self.current: int | None = None
        self.live: Live | None = None
        # Where the text in the current Live starts (what an earlier one showed is left out).
        self.start = 0

    def text(self, message_id: int, text: str) -> None:
        text = shown(text)
        before = self.printed.get(message_id, "")
        if text == before:
            return
        if message_id != self.current:
            self.end()
            self.current = message_id
            if before and text.startswith(before):
                self.start = len(before)
            else:
                self.start = 0
                self.screen.out.write("parley:")
        self.printed[message_id] = text
        if self.screen.interactive:
            self.render(Markdown(text[self.start :].lstrip(), hyperlinks=False))
        else:
            addition = text[len(before) :] if text.startswith(before) else "\n" + text
            self.screen.out.write(addition, ending="")
            self.screen.out.flush()

    def render(self, markdown: Markdown) -> None:
        if self.live is None:
            self.live = Live(
                markdown,
                console=self.screen.console,
                auto_refresh=False,
                vertical_overflow="visible",
            )
            self.live.start()
        else:
            self.live.update(markdown)
        self.live.refresh()

    def end(self) -> None:
        """The current message is over (or something else is printed next)."""
        if self.live is not None:
            self.live.stop()
            self.live = None
        elif self.current is not None:
            self.screen.out.write("")
        self.current = None


def block_keys(message: dict) -> list[str]:
    """A key per tool call and per tool result of the message, in its order."""
    keys = []
    for block in message["blocks"]:
        if block.get("type") == "tool_call":
            keys.append(f"call:{block.get('id')}")
        elif block.get("type") == "tool_result":
            keys.append(f"result:{block.get('tool_call_id')}")
    return keys


class Printer:
    """A transcript's messages as a session shows them: the agent's replies, a line per tool
    call and result, each once (`seen` holds the keys of those already there)."""

    def __init__(self, screen: Screen, known: dict[int, str], seen: set[str]) -> None:
        self.screen = screen
        self.reply = Reply(screen, known)
        self.seen = seen

    def text(self, message_id: int, text: str) -> None:
        self.reply.text(message_id, text)

    def end(self) -> None:
        self.reply.end()

    def message(self, message: dict) -> None:
        """An agent's message: its text first (the step's text comes before its tool calls,
        and may be ahead of the text events still on their way), then its tool use."""
        if message["role"] == "assistant" and message["text"]:
            self.reply.text(message["id"], message["text"])
        self.tools(message)

    def earlier(self, message: dict) -> None:
        """A message of the history: yours after "> ", the agent's, and what was asked."""
        if message["role"] == "user" and message["text"]:
            self.reply.end()
            self.screen.out.write(f"> {shown(message['text'])}")
        self.message(message)
        for block in message["blocks"]:
            if block.get("type") == "action":
                self.reply.end()
                for line in asked_lines(block):
                    self.screen.out.write(line)

    def tools(self, message: dict) -> None:
        """A line per tool call and per result, once each (not for questions: they are
        asked, and their answer is what the user chose; a call that needed approval or asked
        for values is shown, and its result)."""
        if any(
            b.get("type") == "action" and b.get("action_type") not in TOOL_REQUESTS
            for b in message["blocks"]
        ):
            self.seen.update(f"result:{b.get('id')}" for b in message["blocks"])
            self.seen.update(block_keys(message))
            return
        for block, key in zip(
            [b for b in message["blocks"] if b.get("type") in ("tool_call", "tool_result")],
            block_keys(message),
            strict=True,
        ):
            if key in self.seen:
                continue
            self.seen.add(key)
            self.reply.end()
            if block["type"] == "tool_call" or not message.get("isDraft"):
                self.screen.out.write(tool_line(block))


def show_history(screen: Screen, conversation: dict) -> None:
    """The newest messages (at most HISTORY, superseded ones left out) as a session shows
    them, after a line saying that earlier ones are not shown, when there are some. The
    server sends a conversation with its newest page only (`messagesBefore` pages on)."""
    messages = [m for m in conversation.get("messages", []) if not m.get("superseded")]
    if conversation.get("messagesBefore") is not None or len(messages) > HISTORY:
        screen.out.write("(Earlier messages are not shown: the browser has them all.)")
    printer = Printer(screen, {}, set())
    for message in messages[-HISTORY:]:
        printer.earlier(message)
    printer.end()


def tool_line(block: dict) -> str:
    """A tool call (`⚙`, its name and input) or its result (`→`, or `✗` for an error)."""
    if block["type"] == "tool_call":
        arguments = json.dumps(block.get("arguments", {}), ensure_ascii=False)
        return f"  ⚙ {shown_line(block.get('name', ''))} {shown_line(arguments)}"
    content = shortened(shown_line(block.get("content", "")), RESULT_PREVIEW_CHARS)
    mark = "✗" if block.get("is_error") else "→"
    return f"    {mark} {content}"


def asked_lines(block: dict) -> list[str]:
    """What an action block of the history asked, a line each after "?"."""
    extra = block.get("extra") or {}
    lines = []
    if block.get("action_type") == APPROVAL:
        title = shown_line(extra.get("title") or extra.get("tool") or "")
        lines.append(f"  ? Allow {title} ({shown_line(extra.get('server', ''))})?")
    elif block.get("action_type") == ELICITATION:
        server = shown_line(extra.get("server", ""))
        lines.append(f"  ? {server}: {shown_line(extra.get('message', ''))}")
    for question in extra.get("questions") or []:
        if isinstance(question, dict):
            lines.append(f"  ? {shown_line(question.get('question', ''))}")
    return lines


def approval_lines(approval: dict) -> list[str]:
    """A call that waits for approval: the tool, its server, its description and its
    arguments (indented JSON)."""
    title = shown_line(approval.get("title") or approval.get("tool", ""))
    server = shown_line(approval.get("server", ""))
    line = f"  {shown_line(approval.get('name', ''))}"
    description = shortened(shown_line(approval.get("description", "")), DESCRIPTION_CHARS)
    if description:
        line += f": {description}"
    lines = [f"Allow {title} from the server {server}?", line]
    arguments = json.dumps(approval.get("arguments", {}), indent=2, ensure_ascii=False)
    for row in arguments.splitlines():  # JSON escapes control characters; not the rest
        indent = len(row) - len(row.lstrip(" "))
        lines.append("  " + " " * indent + shown_line(row))
    return lines


def question_title(question: dict) -> str:
    """A question as it is asked: its header, the question, its details below."""
    title = shown_line(question["question"])
    if question.get("header"):
        title = f"[{shown_line(question['header'])}] {title}"
    if question.get("details"):
        title += f"\n  {shown_line(question['details'])}"
    return title


def option_title(option: dict) -> str:
    """An option of a question: its label, and its description after a dash."""
    description = option.get("description")
    return shown_line(option["label"]) + (f" — {shown_line(description)}" if description else "")


def listing_line(conversation: dict, waiting: bool) -> str:
    """A conversation in `--list`: `*` when a question waits, its id and its title."""
    marker = "*" if waiting else " "
    pending = "  (a question waits for you)" if waiting else ""
    return f"{marker} {conversation['id']:>5}  {shown_line(conversation['title'])}{pending}"
