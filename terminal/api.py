"""Parley's JSON API over HTTP: requests, the server's refusals, the event stream (SSE).

The session ends on a refusal it cannot go on from (a `CommandError`: its message on one line,
exit status 1), and on a token the server no longer takes (`InvalidToken`).
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from django.core.management.base import CommandError

from terminal.text import shown_line

# What else than a question may wait for the user (the API's `tool`).
APPROVAL, ELICITATION = "tool_approval", "elicitation"
TOOL_REQUESTS = (APPROVAL, ELICITATION)
# An approval's decisions, and an elicitation's actions.
ALLOW, ALWAYS, DENY, EDIT = "allow", "always", "deny", "edit"
ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"


class InvalidToken(CommandError):
    def __init__(self) -> None:
        super().__init__(
            "The server says: invalid or revoked token. Create a new one on the API tokens "
            "page or with `manage.py create_api_token USERNAME`."
        )


@dataclass(frozen=True)
class Event:
    """One event of a conversation's stream: its name and its JSON data."""

    name: str
    data: dict


class Api:
    """A client of one server's `/api/v1` under one token."""

    def __init__(self, server: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=server.rstrip("/") + "/api/v1",
            # X-Parley-Client: answers given here are recorded as through the terminal.
            headers={"Authorization": f"Bearer {token}", "X-Parley-Client": "terminal"},
            timeout=httpx.Timeout(30, read=None),
        )

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, body: dict | None = None):
        """The response's JSON; any refusal ends the session."""
        response = self.request(method, path, body)
        self.check(response)
        return response.json()

    def request(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        """The response as it is, for a caller that reads its status."""
        return self.http.request(method, path, json=body)

    def check(self, response: httpx.Response) -> None:
        """End the session on a refusal: InvalidToken on a 401, else the status and message."""
        if response.status_code == 401:
            raise InvalidToken
        if response.status_code >= 400:
            raise CommandError(f"{response.status_code}: {refusal(response)}")

    @contextmanager
    def events(self, path: str, after: int) -> Iterator[Iterator[Event]]:
        """The event stream at `path` from the change cursor `after` on, open while the block
        runs."""
        headers = {"Last-Event-ID": str(after), "Accept": "text/event-stream"}
        with self.http.stream("GET", path, headers=headers) as stream:
            if stream.status_code >= 400:
                stream.read()
                self.check(stream)
            yield parse_events(stream.iter_lines())


def parse_events(lines: Iterator[str]) -> Iterator[Event]:
    """The events of SSE `lines` that carry data (ids and comments are passed over)."""
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: ") and name:
            yield Event(name, json.loads(line.removeprefix("data: ")))


def refusal(response: httpx.Response) -> str:
    """What the server said when it refused, on one line; with the wait for a rate limit."""
    try:
        message = response.json().get("message", "")
    except ValueError:
        message = ""
    message = shown_line(message or response.text[:300])
    retry = response.headers.get("Retry-After")
    if response.status_code == 429 and retry:
        message += f" (retry after {shown_line(retry)} s)"
    return message
