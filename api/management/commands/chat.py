"""`python manage.py chat`: talk to a Parley server from the terminal, through its JSON API.

A conversation opens on its newest messages (at most 20, after a line saying that earlier ones
are not shown when there are some): a long transcript is never printed whole.

Replies stream in, rendered as markdown (rich) in a terminal; tool calls and their results
show as they happen. A question is asked in the terminal: arrow keys and Enter for one
choice, Space to tick several, "Other…" for a typed answer, y/N for a confirmation; Ctrl+C
rejects it. Without a terminal (a pipe), text is printed plain and questions are numbered;
a reply that does not fit is asked again.

A tool call that needs approval shows the tool, its server and its arguments, then Allow,
Always allow, Deny (with optional feedback) or Edit arguments, chosen with the arrow keys and
Enter only (no key alone allows; keys typed ahead are dropped first); in a pipe, the word is
typed. A running tool's request for values (an elicitation) asks each field by its type, then
Submit, Decline or Cancel.

Everything the server sends is shown as text: terminal control characters (escape sequences
that clear the screen, write the clipboard, hide links) and invisible characters are dropped
before anything is printed, and links are printed with their address.
"""

import json
import math
import os
import sys

import httpx
import questionary
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown

from core.text import clean_message, clean_text

OTHER = "\x00other"
YES, NO = "Yes", "No"
RESULT_PREVIEW_CHARS = 200
DESCRIPTION_CHARS = 300
# What else than a question may wait for the user (the API's `tool`).
APPROVAL, ELICITATION = "tool_approval", "elicitation"
TOOL_REQUESTS = (APPROVAL, ELICITATION)
ALLOW, ALWAYS, DENY, EDIT = "allow", "always", "deny", "edit"
DECISIONS = [
    ("Allow", ALLOW),
    ("Always allow (do not ask again for this tool)", ALWAYS),
    ("Deny", DENY),
    ("Edit arguments", EDIT),
]
ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"
DEFAULT_SERVER = "http://127.0.0.1:8000"
# Messages shown when a conversation opens: the newest of those the server returns with it.
HISTORY = 20


def shown(text: str) -> str:
    """Server text as it may reach the terminal: no control or invisible characters."""
    return clean_message(str(text))


def shown_line(text: str) -> str:
    return clean_text(str(text))


class InvalidToken(CommandError):
    def __init__(self) -> None:
        super().__init__(
            "The server says: invalid or revoked token. Create a new one on the API tokens "
            "page or with `manage.py create_api_token USERNAME`."
        )


class Command(BaseCommand):
    help = (
        "Chat with a Parley server from the terminal, through its JSON API and a token. "
        "Without --conversation, --new or --list: continue the most recent conversation (a "
        "new one when there is none)."
    )
    # Django's own options change nothing in a client of a remote server: left out of --help.
    suppressed_base_arguments = {
        "--version", "--verbosity", "--settings", "--pythonpath", "--traceback", "--no-color",
        "--force-color",
    }  # fmt: skip
    # The local project's system checks say nothing about the server it talks to.
    requires_system_checks = []

    def add_arguments(self, parser):
        # Each help says its default and the variables it reads; the token's value is never
        # shown (help output ends up in scrollback and logs).
        parser.add_argument(
            "--server",
            default=os.environ.get("PARLEY_SERVER", DEFAULT_SERVER),
            help=f"The Parley server's address. Default: $PARLEY_SERVER, else {DEFAULT_SERVER}.",
        )
        parser.add_argument(
            "--token",
            default=os.environ.get("PARLEY_TOKEN", ""),
            help="An API token (Settings → API tokens, or `manage.py create_api_token USERNAME`). "
            "Default: $PARLEY_TOKEN; one of the two is needed.",
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--conversation",
            type=int,
            metavar="ID",
            help="Continue the conversation with this id. Default: the most recent one. "
            "No environment variable.",
        )
        which.add_argument(
            "--new",
            action="store_true",
            help="Start a new conversation. Default: off. No environment variable.",
        )
        which.add_argument(
            "--list",
            action="store_true",
            help="List your conversations (* = a question waits) and exit. Default: off. "
            "No environment variable.",
        )
        parser.add_argument(
            "--title",
            default="",
            help="The new conversation's title (with --new, or when there is none yet). "
            "Default: none (the server names it after the first message). No environment variable.",
        )

    def handle(self, *args, **options) -> None:
        if not options["token"]:
            raise CommandError(
                "A token is needed: --token or PARLEY_TOKEN (create one on the API tokens page "
                "or with `manage.py create_api_token USERNAME`)."
            )
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.console = Console(highlight=False, emoji=False, markup=False)
        self.http = httpx.Client(
            base_url=options["server"].rstrip("/") + "/api/v1",
            # X-Parley-Client: answers given here are recorded as through the terminal.
            headers={"Authorization": f"Bearer {options['token']}", "X-Parley-Client": "terminal"},
            timeout=httpx.Timeout(30, read=None),
        )
        try:
            if options["list"]:
                self.list_conversations()
            else:
                self.chat(self.open_conversation(options))
        except httpx.HTTPError as error:
            raise CommandError(f"Cannot reach the server: {error}") from None
        finally:
            self.http.close()

    # --- Which conversation -------------------------------------------------------------------

    def list_conversations(self) -> None:
        conversations = self.call("GET", "/conversations")
        waiting = {q["conversationId"] for q in self.call("GET", "/questions")}
        if not conversations:
            self.stdout.write("No conversations yet: start one with --new.")
            return
        for conversation in conversations:
            marker = "*" if conversation["id"] in waiting else " "
            title = shown_line(conversation["title"])
            pending = "  (a question waits for you)" if marker == "*" else ""
            self.stdout.write(f"{marker} {conversation['id']:>5}  {title}{pending}")

    def open_conversation(self, options) -> dict:
        """--conversation, --new, or else the most recent conversation (a new one only when
        there is none)."""
        if options["conversation"] is not None:
            return self.call("GET", f"/conversations/{options['conversation']}")
        if not options["new"]:
            recent = self.call("GET", "/conversations")
            if recent:
                return self.call("GET", f"/conversations/{recent[0]['id']}")
        return self.call("POST", "/conversations", {"title": options["title"]})

    # --- The conversation loop ----------------------------------------------------------------

    def chat(self, conversation: dict) -> None:
        self.id = conversation["id"]
        title = shown_line(conversation["title"])
        self.stdout.write(f"Conversation {self.id}: {title}. Ctrl+D to leave.")
        # The elicitations already asked here (each is asked once).
        self.handled: set[str] = set()
        self.show_history(conversation)
        self.attend(conversation)
        while True:
            try:
                text = input("> ")
            except (EOFError, KeyboardInterrupt):
                self.stdout.write("")
                return
            if not text.strip():
                continue
            cursor = self.cursor()
            if self.send("POST", f"/conversations/{self.id}/messages", {"content": text}):
                self.follow(cursor)

    def show_history(self, conversation: dict) -> None:
        """The newest messages (at most HISTORY, superseded ones left out) as a session shows
        them, after a line saying that earlier ones are not shown, when there are some. The
        server sends a conversation with its newest page only (`messagesBefore` pages on)."""
        messages = [m for m in conversation.get("messages", []) if not m.get("superseded")]
        if conversation.get("messagesBefore") is not None or len(messages) > HISTORY:
            self.stdout.write("(Earlier messages are not shown: the browser has them all.)")
        self.reply = Reply(self, {})
        seen: set[str] = set()
        for message in messages[-HISTORY:]:
            if message["role"] == "user" and message["text"]:
                self.reply.end()
                self.stdout.write(f"> {shown(message['text'])}")
            elif message["role"] == "assistant" and message["text"]:
                self.reply.text(message["id"], message["text"])
            self.show_tools(message, seen)
            for block in message["blocks"]:
                if block.get("type") == "action":
                    self.reply.end()
                    extra = block.get("extra") or {}
                    if block.get("action_type") == APPROVAL:
                        title = shown_line(extra.get("title") or extra.get("tool") or "")
                        server = shown_line(extra.get("server", ""))
                        self.stdout.write(f"  ? Allow {title} ({server})?")
                    elif block.get("action_type") == ELICITATION:
                        server = shown_line(extra.get("server", ""))
                        self.stdout.write(f"  ? {server}: {shown_line(extra.get('message', ''))}")
                    for question in extra.get("questions") or []:
                        if isinstance(question, dict):
                            self.stdout.write(f"  ? {shown_line(question.get('question', ''))}")
        self.reply.end()

    def cursor(self) -> tuple[int, dict[int, str], set[str]]:
        """Where the transcript is now: its change cursor, each reply's text so far, and the
        blocks already there."""
        conversation = self.call("GET", f"/conversations/{self.id}")
        texts = {m["id"]: m["text"] for m in conversation["messages"] if m["role"] == "assistant"}
        seen = {key for m in conversation["messages"] for key in self.block_keys(m)}
        return conversation["seq"], texts, seen

    @staticmethod
    def block_keys(message: dict) -> list[str]:
        keys = []
        for block in message["blocks"]:
            if block.get("type") == "tool_call":
                keys.append(f"call:{block.get('id')}")
            elif block.get("type") == "tool_result":
                keys.append(f"result:{block.get('tool_call_id')}")
        return keys

    def follow(self, position: tuple[int, dict[int, str], set[str]]) -> None:
        """Show the agent's text as it streams and its tool use, until its turn ends or asks
        something."""
        cursor, known, seen = position
        self.reply = Reply(self, dict(known))
        headers = {"Last-Event-ID": str(cursor), "Accept": "text/event-stream"}
        with self.http.stream("GET", f"/conversations/{self.id}/events", headers=headers) as stream:
            if stream.status_code >= 400:
                stream.read()
                self.fail(stream)
            event = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event:
                    data = json.loads(line.removeprefix("data: "))
                    if event == "text":
                        self.reply.text(data["messageId"], data["text"])
                    elif event == "message":
                        # Its text first: the step's text comes before its tool calls, and
                        # may be ahead of the text events still on their way.
                        if data["role"] == "assistant" and data["text"]:
                            self.reply.text(data["id"], data["text"])
                        self.show_tools(data, seen)
                        if self.asks(data):
                            # A running tool waits for values: ask them, then follow on
                            # (the message's text first: its text event has not come yet).
                            stream.close()
                            if data["role"] == "assistant" and data["text"]:
                                self.reply.text(data["id"], data["text"])
                            self.reply.end()
                            self.attend(self.call("GET", f"/conversations/{self.id}"))
                            return
                    elif event == "revoked":
                        self.reply.end()
                        raise InvalidToken
                    elif event == "state_change" and data["state"] not in (
                        "llm_requesting",
                        "tool_executing",
                    ):
                        self.reply.end()
                        if data["state"] == "error":
                            self.stderr.write("The agent failed; send a message to go on.")
                        elif data.get("pendingQuestions") or data.get("pendingQuestion"):
                            stream.close()
                            self.attend(data)
                        return
        self.reply.end()

    def show_tools(self, message: dict, seen: set[str]) -> None:
        """A line per tool call and per result, once each (not for questions: they are
        asked, and their answer is what the user chose; a call that needed approval or asked
        for values is shown, and its result)."""
        if any(
            b.get("type") == "action" and b.get("action_type") not in TOOL_REQUESTS
            for b in message["blocks"]
        ):
            seen.update(f"result:{b.get('id')}" for b in message["blocks"])
            seen.update(self.block_keys(message))
            return
        for block, key in zip(
            [b for b in message["blocks"] if b.get("type") in ("tool_call", "tool_result")],
            self.block_keys(message),
            strict=True,
        ):
            if key in seen:
                continue
            seen.add(key)
            self.reply.end()
            if block["type"] == "tool_call":
                arguments = json.dumps(block.get("arguments", {}), ensure_ascii=False)
                self.stdout.write(
                    f"  ⚙ {shown_line(block.get('name', ''))} {shown_line(arguments)}"
                )
            elif not message.get("isDraft"):
                content = shown_line(block.get("content", ""))
                if len(content) > RESULT_PREVIEW_CHARS:
                    content = content[: RESULT_PREVIEW_CHARS - 1] + "…"
                mark = "✗" if block.get("is_error") else "→"
                self.stdout.write(f"    {mark} {content}")

    def asks(self, message: dict) -> bool:
        """Whether the message shows an elicitation that waits and was not asked here yet."""
        return any(
            block.get("type") == "action"
            and block.get("action_type") == ELICITATION
            and (block.get("extra") or {}).get("questionResolution") == "asked"
            and (block.get("extra") or {}).get("toolCallId") not in self.handled
            for block in message.get("blocks", [])
        )

    # --- What waits for the user --------------------------------------------------------------

    def attend(self, result: dict) -> None:
        """Ask what waits for the user (a conversation, an agent result or a state change):
        a running tool's elicitation, the paused turn's approvals, or its question; then
        follow the turn."""
        pending = result.get("pendingQuestions")
        if pending is None:  # a server from before approvals
            pending = [result["pendingQuestion"]] if result.get("pendingQuestion") else []
        elicitations = [p for p in pending if p.get("tool") == ELICITATION]
        elicitations = [p for p in elicitations if p["toolCallId"] not in self.handled]
        approvals = [p for p in pending if p.get("tool") == APPROVAL]
        questions = [p for p in pending if p.get("tool") not in TOOL_REQUESTS]
        if elicitations:
            self.elicit(elicitations[0])
        elif approvals:
            self.decide_all(approvals)
        elif questions:
            self.answer(questions[0])

    # --- Approvals ----------------------------------------------------------------------------

    def decide_all(self, approvals: list[dict]) -> None:
        """Decide each approval of the paused step in turn; the step goes on after the last."""
        cursor = self.cursor()
        result = None
        for pending in approvals:
            try:
                result = self.decide(pending) or result
            except KeyboardInterrupt:
                self.stdout.write("Rejected.")
                cursor = self.cursor()
                if self.send("POST", f"/conversations/{self.id}/cancel", {}):
                    self.follow(cursor)
                return
            except EOFError:
                self.stdout.write("")
                return
        if result is None:
            return  # every one was decided elsewhere: back to the prompt
        if result["status"] == "needs_input":
            self.attend(result)  # more waits than was listed
        else:
            self.follow(cursor)

    def decide(self, pending: dict) -> dict | None:
        """Show one approval and send the user's decision: the agent result, or None when the
        server refused it for good (decided elsewhere)."""
        approval = pending["approval"]
        self.show_approval(approval)
        path = f"/conversations/{self.id}/approvals/{pending['toolCallId']}"
        text = json.dumps(approval.get("arguments", {}), ensure_ascii=False)
        while True:
            decision = self.choose_decision()
            if decision == EDIT:
                response, text = self.allow_edited(path, text)
                if response is None:
                    continue  # left empty: choose again
            else:
                body: dict = {"decision": decision}
                if decision == DENY:
                    feedback = self.prompt_text("Feedback for the agent (optional):")
                    if feedback.strip():
                        body["feedback"] = feedback
                response = self.http.post(path, json=body)
                if response.status_code in (400, 422):
                    self.stderr.write(f"{self.message(response)} Try again.")
                    continue
            if response.status_code >= 400 and response.status_code != 401:
                self.stderr.write(self.message(response))
                return None
            self.refuse_errors(response)
            return response.json()

    def allow_edited(self, path: str, text: str) -> tuple[httpx.Response | None, str]:
        """Allow with arguments the user types (starting from `text`), until the server takes
        them: its response and the text, or None when the user left them empty."""
        while True:
            arguments, text = self.edit_arguments(text)
            if arguments is None:
                return None, text
            response = self.http.post(path, json={"decision": ALLOW, "arguments": arguments})
            if response.status_code not in (400, 422):
                return response, text
            # What does not fit the tool's input schema, in the server's words.
            self.stderr.write(f"{self.message(response)} Edit them again.")

    def show_approval(self, approval: dict) -> None:
        title = shown_line(approval.get("title") or approval.get("tool", ""))
        server = shown_line(approval.get("server", ""))
        self.stdout.write(f"Allow {title} from the server {server}?")
        line = f"  {shown_line(approval.get('name', ''))}"
        description = shown_line(approval.get("description", ""))
        if description:
            if len(description) > DESCRIPTION_CHARS:
                description = description[: DESCRIPTION_CHARS - 1] + "…"
            line += f": {description}"
        self.stdout.write(line)
        arguments = json.dumps(approval.get("arguments", {}), indent=2, ensure_ascii=False)
        for row in arguments.splitlines():  # JSON escapes control characters; not the rest
            indent = len(row) - len(row.lstrip(" "))
            self.stdout.write("  " + " " * indent + shown_line(row))

    def choose_decision(self) -> str:
        if self.interactive:
            drop_typed_ahead()
            choices = [questionary.Choice(title=t, value=v) for t, v in DECISIONS]
            return questionary.select(
                "Your decision:", choices=choices, instruction="(arrow keys, then Enter)"
            ).unsafe_ask()
        words = {v: v for _, v in DECISIONS}
        while True:
            reply = input("Type allow, always, deny or edit: ").strip().lower()
            if reply in words:
                return words[reply]
            self.stdout.write("Type one of: allow, always, deny, edit.")

    def edit_arguments(self, text: str) -> tuple[dict | None, str]:
        """Arguments typed as a JSON object (None, when left empty), and the text typed."""
        while True:
            if self.interactive:
                typed = questionary.text("Arguments (JSON, empty to go back):", default=text)
                typed = typed.unsafe_ask()
            else:
                typed = input("Arguments (JSON, empty to go back): ")
            if not typed.strip():
                return None, text
            text = typed
            try:
                value = json.loads(typed)
            except ValueError as error:
                self.stdout.write(f"That is not valid JSON: {error}.")
                continue
            if not isinstance(value, dict):
                self.stdout.write("The arguments must be a JSON object: {...}.")
                continue
            return value, text

    def prompt_text(self, label: str, default: str = "") -> str:
        if self.interactive:
            return questionary.text(label, default=default).unsafe_ask()
        return input(f"{label} ") or default

    # --- Elicitations -------------------------------------------------------------------------

    def elicit(self, pending: dict) -> None:
        """A running tool asks for values (or to open a link): ask them, send the answer, and
        follow the turn."""
        key = pending["toolCallId"]
        self.handled.add(key)
        asked = pending["elicitation"]
        server = shown_line(asked.get("server", ""))
        self.stdout.write(f"The server {server} asks: {shown(asked.get('message', ''))}")
        while True:
            try:
                if asked.get("mode") == "url":
                    body = self.ask_url(asked.get("url", ""))
                else:
                    body = self.ask_form(asked.get("fields") or [])
            except KeyboardInterrupt:
                self.stdout.write("Cancelled.")
                body = {"action": CANCEL}
            except EOFError:
                self.stdout.write("")
                return
            cursor = self.cursor()
            response = self.http.post(f"/conversations/{self.id}/elicitations/{key}", json=body)
            if response.status_code in (400, 422) and body["action"] == ACCEPT:
                self.stderr.write(f"{self.message(response)} Try again.")
                continue
            if response.status_code >= 400 and response.status_code != 401:
                self.stderr.write(self.message(response))
                return
            self.refuse_errors(response)
            self.follow(cursor)
            return

    def ask_url(self, url: str) -> dict:
        self.stdout.write(f"  Open this link: {shown_line(url)}")
        choices = [("Done: I opened it", ACCEPT), ("Decline", DECLINE), ("Cancel", CANCEL)]
        return {"action": self.choose("Then:", choices)}

    def ask_form(self, fields: list[dict]) -> dict:
        content = {}
        for field in fields:
            value = self.ask_field(field)
            if value is not None:
                content[field["name"]] = value
        choices = [("Submit", ACCEPT), ("Decline", DECLINE), ("Cancel", CANCEL)]
        action = self.choose("Send it?", choices)
        return {"action": action, "content": content} if action == ACCEPT else {"action": action}

    def choose(self, title: str, choices: list[tuple[str, str]]) -> str:
        """One of `choices` ((label, value)): a select in a terminal, its word in a pipe."""
        if self.interactive:
            options = [questionary.Choice(title=t, value=v) for t, v in choices]
            return questionary.select(title, choices=options).unsafe_ask()
        words = {label.split(":")[0].lower(): value for label, value in choices}
        hint = ", ".join(words)
        while True:
            reply = input(f"{title} Type {hint}: ").strip().lower()
            if reply in words:
                return words[reply]
            self.stdout.write(f"Type one of: {hint}.")

    def ask_field(self, field: dict):
        """One form field's value by its kind (None: left out)."""
        label = shown_line(field.get("title") or field["name"])
        if field.get("description"):
            label += f" ({shown_line(field['description'])})"
        kind = field.get("kind")
        default = field.get("default")
        if kind == "boolean":
            return self.ask_yes_no(label, bool(default))
        if kind == "enum":
            return self.ask_choice(label, field)
        hint = limits_hint(field)
        shown_default = "" if default is None else str(default)
        if self.interactive:

            def check(text: str):
                return parse_field(field, text)[1] or True

            text = questionary.text(
                f"{label}{hint}:", default=shown_default, validate=check
            ).unsafe_ask()
            return parse_field(field, text)[0]
        while True:
            suffix = f" [{shown_line(shown_default)}]" if shown_default else ""
            text = input(f"{label}{hint}{suffix}: ") or shown_default
            value, problem = parse_field(field, text)
            if problem is None:
                return value
            self.stdout.write(problem)

    def ask_yes_no(self, label: str, default: bool) -> bool:
        if self.interactive:
            return questionary.confirm(label, default=default, auto_enter=False).unsafe_ask()
        while True:
            reply = input(f"{label} (y/n) [{'y' if default else 'n'}]: ").strip().lower()
            if not reply:
                return default
            if reply in ("y", "yes", "n", "no"):
                return reply.startswith("y")
            self.stdout.write("Type y or n.")

    def ask_choice(self, label: str, field: dict):
        choices = [(shown_line(c["title"]), c["value"]) for c in field.get("choices", [])]
        if not field.get("required"):
            choices.append(("(none)", None))
        default = field.get("default")
        if self.interactive:
            options = [questionary.Choice(title=t, value=v) for t, v in choices]
            start = next((o for o in options if o.value == default and default is not None), None)
            return questionary.select(label, choices=options, default=start).unsafe_ask()
        self.stdout.write(label)
        for number, (title, _) in enumerate(choices, 1):
            self.stdout.write(f"  {number}) {title}")
        while True:
            reply = input(f"Number 1-{len(choices)}: ").strip()
            if reply.isdecimal() and reply.isascii() and 1 <= int(reply) <= len(choices):
                return choices[int(reply) - 1][1]
            self.stdout.write(f"Choose by number, 1-{len(choices)}.")

    # --- Questions ----------------------------------------------------------------------------

    def answer(self, pending: dict) -> None:
        while True:
            answers = {}
            try:
                for question in pending["questions"]:
                    answers[question["question"]] = self.ask(question)
            except KeyboardInterrupt:
                self.stdout.write("Rejected.")
                cursor = self.cursor()
                if self.send("POST", f"/conversations/{self.id}/cancel", {}):
                    self.follow(cursor)
                return
            except EOFError:
                self.stdout.write("")
                return
            cursor = self.cursor()
            body = {"answers": answers, "toolCallId": pending["toolCallId"]}
            response = self.http.post(f"/conversations/{self.id}/respond", json=body)
            if response.status_code == 422:
                self.stderr.write(f"{self.message(response)} Try again.")
                continue  # the same question, asked again
            if response.status_code >= 400 and response.status_code != 401:
                self.stderr.write(self.message(response))
                return
            self.refuse_errors(response)
            self.follow(cursor)
            return

    def ask(self, question: dict):
        title = shown_line(question["question"])
        if question.get("header"):
            title = f"[{shown_line(question['header'])}] {title}"
        if question.get("details"):
            title += f"\n  {shown_line(question['details'])}"
        labels = [o["label"] for o in question["options"]]
        if self.interactive:
            return self.ask_tty(title, question, labels)
        return self.ask_numbered(title, question, labels)

    @staticmethod
    def is_confirmation(question: dict, labels: list[str]) -> bool:
        return labels == [YES, NO] and not question["custom"]

    def ask_tty(self, title: str, question: dict, labels: list[str]):
        if self.is_confirmation(question, labels):
            yes = questionary.confirm(title, default=question.get("default") != NO).unsafe_ask()
            return YES if yes else NO
        if not labels:
            return questionary.text(title, validate=bool).unsafe_ask()
        choices = [
            questionary.Choice(
                title=shown_line(o["label"])
                + (f" — {shown_line(o['description'])}" if o.get("description") else ""),
                value=o["label"],
            )
            for o in question["options"]
        ]
        if question["custom"]:
            choices.append(questionary.Choice(title="Other…", value=OTHER))
        if question["multiSelect"]:
            chosen = questionary.checkbox(
                title, choices=choices, validate=lambda picked: bool(picked) or "Pick at least one."
            ).unsafe_ask()
            if OTHER in chosen:
                chosen = [c for c in chosen if c != OTHER]
                chosen.append(questionary.text("Your answer:", validate=bool).unsafe_ask())
            return chosen
        chosen = questionary.select(title, choices=choices).unsafe_ask()
        if chosen == OTHER:
            return questionary.text("Your answer:", validate=bool).unsafe_ask()
        return chosen

    def ask_numbered(self, title: str, question: dict, labels: list[str]):
        """Numbered choices; a reply that does not fit is explained and asked again."""
        self.stdout.write(title)
        for number, option in enumerate(question["options"], 1):
            label = shown_line(option["label"])
            description = (
                f" — {shown_line(option['description'])}" if option.get("description") else ""
            )
            self.stdout.write(f"  {number}) {label}{description}")
        confirmation = self.is_confirmation(question, labels)
        if not labels:
            hint = "Your answer: "
        elif confirmation:
            hint = "1 or y (Yes), 2 or n (No): "
        elif question["multiSelect"]:
            typed = " (or type an answer)" if question["custom"] else ""
            hint = f"Numbers 1-{len(labels)}, comma-separated{typed}: "
        else:
            typed = " (or type an answer)" if question["custom"] else ""
            hint = f"Number 1-{len(labels)}{typed}: "
        while True:
            reply = input(hint).strip()
            answer, problem = self.parse_numbered(reply, question, labels, confirmation)
            if problem is None:
                return answer
            self.stdout.write(problem)

    @staticmethod
    def parse_numbered(reply: str, question: dict, labels: list[str], confirmation: bool):
        """(answer, None), or (None, what is wrong with the reply)."""
        if not reply:
            return None, "Type an answer." if not labels else "Choose an option."
        if not labels:
            return reply, None
        if confirmation and reply.lower() in ("y", "yes", "n", "no"):
            return (YES if reply.lower().startswith("y") else NO), None
        parts = [p.strip() for p in reply.split(",")] if question["multiSelect"] else [reply]
        picked = []
        for part in filter(None, parts):
            if part.isdecimal() and part.isascii():
                if not 1 <= int(part) <= len(labels):
                    return None, f"There is no option {part}: choose 1-{len(labels)}."
                picked.append(labels[int(part) - 1])
            elif question["custom"]:
                picked.append(part)
            else:
                return None, f"Choose by number, 1-{len(labels)}."
        if not picked:
            return None, "Choose an option."
        if question["multiSelect"]:
            return picked, None
        if len(picked) > 1:
            return None, "Choose one option."
        return picked[0], None

    # --- HTTP ---------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict | None = None):
        response = self.http.request(method, path, json=body)
        self.refuse_errors(response)
        return response.json()

    def send(self, method: str, path: str, body: dict) -> bool:
        """A request the server may refuse (busy, too fast, nothing to cancel): the refusal is
        shown and the session goes on. True when it was accepted."""
        response = self.http.request(method, path, json=body)
        if response.status_code in (400, 409, 413, 422, 429):
            self.stderr.write(self.message(response))
            return False
        self.refuse_errors(response)
        return True

    def refuse_errors(self, response: httpx.Response) -> None:
        if response.status_code >= 400:
            self.fail(response)

    def fail(self, response: httpx.Response):
        if response.status_code == 401:
            raise InvalidToken
        raise CommandError(f"{response.status_code}: {self.message(response)}")

    @staticmethod
    def message(response: httpx.Response) -> str:
        try:
            message = response.json().get("message", "")
        except ValueError:
            message = ""
        message = shown_line(message or response.text[:300])
        retry = response.headers.get("Retry-After")
        if response.status_code == 429 and retry:
            message += f" (retry after {shown_line(retry)} s)"
        return message


def drop_typed_ahead() -> None:
    """Forget keys typed before an approval was shown (an Enter meant for something else
    must not allow a call)."""
    try:
        import termios

        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass


def plain(number) -> str:
    return str(int(number)) if float(number) == int(number) else str(number)


def limits_hint(field: dict) -> str:
    """What a number or text field takes, shown after its label."""
    kind = field.get("kind")
    low, high = field.get("minimum"), field.get("maximum")
    parts = []
    if kind in ("number", "integer"):
        parts.append("a whole number" if kind == "integer" else "a number")
        if low is not None and high is not None:
            parts.append(f"{plain(low)}-{plain(high)}")
        elif low is not None:
            parts.append(f"at least {plain(low)}")
        elif high is not None:
            parts.append(f"at most {plain(high)}")
    if not field.get("required"):
        parts.append("optional")
    return f" [{', '.join(parts)}]" if parts else ""


def parse_field(field: dict, text: str):
    """(value, None), or (None, what is wrong with the text); an optional field left empty is
    (None, None). The server checks again."""
    label = shown_line(field.get("title") or field["name"])
    kind = field.get("kind")
    if not text.strip():
        return None, (f"{label} is required." if field.get("required") else None)
    if kind in ("number", "integer"):
        try:
            number = float(text)
        except ValueError:
            return None, f"{label} must be a number."
        if not math.isfinite(number):
            return None, f"{label} must be a number."
        if kind == "integer":
            if number != int(number):
                return None, f"{label} must be a whole number."
            number = int(number)
        low, high = field.get("minimum"), field.get("maximum")
        if low is not None and number < low:
            return None, f"{label} must be at least {plain(low)}."
        if high is not None and number > high:
            return None, f"{label} must be at most {plain(high)}."
        return number, None
    shortest, longest = field.get("minLength"), field.get("maxLength")
    if shortest is not None and len(text) < shortest:
        return None, f"{label} must be at least {shortest} characters long."
    if longest is not None and len(text) > longest:
        return None, f"{label} must be at most {longest} characters long."
    return text, None


class Reply:
    """The assistant's text as it streams: markdown re-rendered in place in a terminal, plain
    text appended in a pipe. A message's text is shown once: after something else was printed
    (a tool call), only the text that came since follows, under no second "parley:"."""

    def __init__(self, command: Command, known: dict[int, str]) -> None:
        self.command = command
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
                self.command.stdout.write("parley:")
        self.printed[message_id] = text
        if self.command.interactive:
            markdown = Markdown(text[self.start :].lstrip(), hyperlinks=False)
            if self.live is None:
                self.live = Live(
                    markdown,
                    console=self.command.console,
                    auto_refresh=False,
                    vertical_overflow="visible",
                )
                self.live.start()
            else:
                self.live.update(markdown)
            self.live.refresh()
        else:
            addition = text[len(before) :] if text.startswith(before) else "\n" + text
            self.command.stdout.write(addition, ending="")
            self.command.stdout.flush()

    def end(self) -> None:
        """The current message is over (or something else is printed next)."""
        if self.live is not None:
            self.live.stop()
            self.live = None
        elif self.current is not None:
            self.command.stdout.write("")
        self.current = None
