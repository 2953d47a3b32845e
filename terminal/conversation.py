"""One conversation on the server, as the session and what it asks act on it; and what
happens next once something was sent (`Next`).
"""

from dataclasses import dataclass

import httpx

from terminal.api import Api, refusal
from terminal.render import Screen, block_keys


@dataclass(frozen=True)
class Position:
    """Where the transcript was before something was sent: its change cursor, each reply's
    text so far, and the keys of the tool calls and results already there. The turn is
    followed from here."""

    seq: int
    texts: dict[int, str]
    seen: set[str]


@dataclass(frozen=True)
class Attend:
    """Something waits for the person: `result` (a conversation, an agent result or a state
    change) says what."""

    result: dict


# What a session does next: follow the turn from a position, ask what waits, or (None) go
# back to the prompt.
type Next = Position | Attend | None


class Conversation:
    """The API's calls on one conversation; refusals the session goes on from are shown."""

    def __init__(self, api: Api, screen: Screen, conversation_id: int) -> None:
        self.api = api
        self.screen = screen
        self.id = conversation_id

    def path(self, *parts) -> str:
        return f"/conversations/{self.id}" + "".join(f"/{part}" for part in parts)

    def detail(self) -> dict:
        return self.api.call("GET", self.path())

    def position(self) -> Position:
        """Where the transcript is now, to follow what is sent next from."""
        conversation = self.detail()
        messages = conversation["messages"]
        texts = {m["id"]: m["text"] for m in messages if m["role"] == "assistant"}
        seen = {key for m in messages for key in block_keys(m)}
        return Position(conversation["seq"], texts, seen)

    def events(self, after: int):
        """The conversation's event stream from the change cursor `after` on (a context
        manager)."""
        return self.api.events(self.path("events"), after)

    def post(self, path: str, body: dict) -> httpx.Response:
        return self.api.request("POST", path, body)

    def send(self, path: str, body: dict) -> Position | None:
        """A request the server may refuse (busy, too fast, nothing to cancel): where to follow
        the turn from once it was accepted, or None when it was refused (the refusal is shown,
        and the session goes on)."""
        position = self.position()
        response = self.post(path, body)
        if response.status_code in (400, 409, 413, 422, 429):
            self.screen.err.write(refusal(response))
            return None
        self.api.check(response)
        return position

    def reject(self) -> Position | None:
        """Ctrl+C at a question or an approval: stop the agent."""
        self.screen.out.write("Rejected.")
        return self.send(self.path("cancel"), {})

    def refused(self, response: httpx.Response, then: str, statuses=(400, 422)) -> bool:
        """Whether the server refused what was typed (one of `statuses`: it does not fit); if
        so, its words are shown, then `then` (what the person does next)."""
        if response.status_code not in statuses:
            return False
        self.screen.err.write(f"{refusal(response)} {then}")
        return True

    def accepted(self, response: httpx.Response) -> bool:
        """Whether the server took an answer; a refusal is shown (the session goes on), but a
        token it no longer takes ends the session."""
        if response.status_code >= 400 and response.status_code != 401:
            self.screen.err.write(refusal(response))
            return False
        self.api.check(response)
        return True
