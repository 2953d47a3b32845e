"""`python manage.py chat`: talk to a Parley server from the terminal, through its JSON API.

Replies stream in as they are written. A question is asked in the terminal: arrow keys and
Enter for one choice, Space to tick several, "Other…" for a typed answer, y/N for a
confirmation; Ctrl+C rejects it. Without a terminal (a pipe), questions are numbered.
"""

import json
import os
import sys

import httpx
import questionary
from django.core.management.base import BaseCommand, CommandError

OTHER = "\x00other"


class Command(BaseCommand):
    help = "Chat with a Parley server from the terminal (uses the JSON API and a token)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--server", default=os.environ.get("PARLEY_SERVER", "http://127.0.0.1:8000")
        )
        parser.add_argument("--token", default=os.environ.get("PARLEY_TOKEN", ""))
        parser.add_argument("--conversation", type=int, help="Continue this conversation.")

    def handle(self, *args, **options) -> None:
        if not options["token"]:
            raise CommandError(
                "A token is needed: --token or PARLEY_TOKEN (create one on the API tokens page "
                "or with `manage.py create_api_token USERNAME`)."
            )
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.http = httpx.Client(
            base_url=options["server"].rstrip("/") + "/api/v1",
            headers={"Authorization": f"Bearer {options['token']}"},
            timeout=httpx.Timeout(30, read=None),
        )
        try:
            self.chat(options["conversation"])
        except httpx.HTTPError as error:
            raise CommandError(f"Cannot reach the server: {error}") from None
        finally:
            self.http.close()

    # --- The conversation loop ----------------------------------------------------------------

    def chat(self, conversation_id: int | None) -> None:
        if conversation_id is None:
            conversation = self.call("POST", "/conversations", {"title": "Terminal"})
        else:
            conversation = self.call("GET", f"/conversations/{conversation_id}")
        self.id = conversation["id"]
        self.stdout.write(f"Conversation {self.id}. Ctrl+D to leave.")
        if conversation.get("pendingQuestion"):
            self.answer(conversation["pendingQuestion"])
        while True:
            try:
                text = input("> ")
            except (EOFError, KeyboardInterrupt):
                self.stdout.write("")
                return
            if not text.strip():
                continue
            cursor = self.cursor()
            self.call("POST", f"/conversations/{self.id}/messages", {"content": text})
            self.follow(cursor)

    def cursor(self) -> tuple[int, dict[int, str]]:
        """Where the transcript is now: its change cursor, and the text of each reply so far."""
        conversation = self.call("GET", f"/conversations/{self.id}")
        texts = {m["id"]: m["text"] for m in conversation["messages"] if m["role"] == "assistant"}
        return conversation["seq"], texts

    def follow(self, position: tuple[int, dict[int, str]]) -> None:
        """Print the agent's text as it streams, until its turn ends or asks something."""
        cursor, known = position
        printed: dict[int, str] = dict(known)
        fresh = set()
        headers = {"Last-Event-ID": str(cursor), "Accept": "text/event-stream"}
        with self.http.stream("GET", f"/conversations/{self.id}/events", headers=headers) as stream:
            event = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event:
                    data = json.loads(line.removeprefix("data: "))
                    if event == "text":
                        self.show_text(printed, fresh, data)
                    elif event == "state_change" and data["state"] not in (
                        "llm_requesting",
                        "tool_executing",
                    ):
                        if fresh:
                            self.stdout.write("")
                        if data["state"] == "error":
                            self.stderr.write("The agent failed; send a message to go on.")
                        elif data.get("pendingQuestion"):
                            stream.close()
                            self.answer(data["pendingQuestion"])
                        return

    def show_text(self, printed: dict[int, str], fresh: set[int], data: dict) -> None:
        message_id, text = data["messageId"], data["text"]
        before = printed.get(message_id, "")
        if text == before:
            return
        if message_id not in fresh:
            if fresh:
                self.stdout.write("")
            self.stdout.write("parley: ", ending="")
            fresh.add(message_id)
        addition = text[len(before) :] if text.startswith(before) else "\n" + text
        self.stdout.write(addition, ending="")
        self.stdout.flush()
        printed[message_id] = text

    # --- Questions ----------------------------------------------------------------------------

    def answer(self, pending: dict) -> None:
        answers = {}
        try:
            for question in pending["questions"]:
                answers[question["question"]] = self.ask(question)
        except KeyboardInterrupt:
            self.stdout.write("Rejected.")
            cursor = self.cursor()
            self.call("POST", f"/conversations/{self.id}/cancel", {})
            self.follow(cursor)
            return
        cursor = self.cursor()
        self.call(
            "POST",
            f"/conversations/{self.id}/respond",
            {"answers": answers, "toolCallId": pending["toolCallId"]},
        )
        self.follow(cursor)

    def ask(self, question: dict):
        title = question["question"]
        if question.get("header"):
            title = f"[{question['header']}] {title}"
        if question.get("details"):
            title += f"\n  {question['details']}"
        labels = [o["label"] for o in question["options"]]
        if self.interactive:
            return self.ask_tty(title, question, labels)
        return self.ask_numbered(title, question, labels)

    def ask_tty(self, title: str, question: dict, labels: list[str]):
        if labels == ["Yes", "No"] and not question["custom"]:
            yes = questionary.confirm(title, default=question.get("default") != "No").unsafe_ask()
            return "Yes" if yes else "No"
        if not labels:
            return questionary.text(title).unsafe_ask()
        choices = [
            questionary.Choice(
                title=o["label"] + (f" — {o['description']}" if o.get("description") else ""),
                value=o["label"],
            )
            for o in question["options"]
        ]
        if question["custom"]:
            choices.append(questionary.Choice(title="Other…", value=OTHER))
        if question["multiSelect"]:
            chosen = questionary.checkbox(title, choices=choices).unsafe_ask()
            if OTHER in chosen:
                chosen = [c for c in chosen if c != OTHER]
                chosen.append(questionary.text("Your answer:").unsafe_ask())
            return chosen
        chosen = questionary.select(title, choices=choices).unsafe_ask()
        if chosen == OTHER:
            return questionary.text("Your answer:").unsafe_ask()
        return chosen

    def ask_numbered(self, title: str, question: dict, labels: list[str]):
        self.stdout.write(title)
        for number, option in enumerate(question["options"], 1):
            description = f" — {option['description']}" if option.get("description") else ""
            self.stdout.write(f"  {number}) {option['label']}{description}")
        if not labels:
            hint = "Your answer: "
        elif question["multiSelect"]:
            hint = (
                "Numbers, comma-separated"
                + (" (or type an answer)" if question["custom"] else "")
                + ": "
            )
        else:
            hint = "Number" + (" (or type an answer)" if question["custom"] else "") + ": "
        reply = input(hint).strip()
        picked = []
        for part in reply.split(",") if question["multiSelect"] else [reply]:
            part = part.strip()
            if part.isdigit() and 1 <= int(part) <= len(labels):
                picked.append(labels[int(part) - 1])
            elif part:
                picked.append(part)
        return picked if question["multiSelect"] else (picked[0] if picked else "")

    # --- HTTP ---------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        response = self.http.request(method, path, json=body)
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise CommandError(f"{response.status_code}: {message}")
        return response.json()
