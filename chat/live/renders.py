"""Render once, send to many: the push just rendered for one tab of a conversation, kept for
the other tabs of this process that are in the same state.

Several tabs on one conversation (a person's desktop and phone, two windows) get the same
change, and each would read the database and render the same partials for it. A push depends
on the database and on the tab: who reads it, in which language, its cursor and what it has
of each streaming draft, header and sub-agent (`state`). A tab whose state matches the one a
push was rendered for takes that push as it is, if it covers the change the tab is pushed for
(its cursor is at or past it): every later change still reaches the tab by its own event.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Render:
    """A push rendered for a tab in `state` of the conversation created at `created_at` (an id
    may be taken again after a delete): what it sent, its new cursor, whether a turn runs, and
    the tab's state after it."""

    created_at: datetime
    state: tuple
    html: str
    cursor: int
    running: bool
    drafts: dict[int, str]
    header_key: tuple | None
    subagents: dict[int, int]


class SharedRenders:
    """The latest push of each conversation, for `size` conversations at most, and only pushes
    of up to `max_chars` (with the drafts they leave the tab): a catch-up of a whole transcript
    is one tab's alone."""

    def __init__(self, size: int, max_chars: int) -> None:
        self.size = size
        self.max_chars = max_chars
        self.renders: OrderedDict[int, Render] = OrderedDict()
        self.lock = threading.Lock()

    def get(
        self, conversation_id: int, created_at: datetime, state: tuple, upto: int
    ) -> Render | None:
        """The push for a tab in `state` that covers change `upto`, if one was just rendered."""
        with self.lock:
            render = self.renders.get(conversation_id)
        if (
            render is None
            or render.created_at != created_at
            or render.state != state
            or render.cursor < upto
        ):
            return None
        return render

    def put(self, conversation_id: int, render: Render) -> None:
        chars = len(render.html) + 2 * sum(map(len, render.drafts.values()))
        if chars > self.max_chars:
            return
        with self.lock:
            self.renders[conversation_id] = render
            self.renders.move_to_end(conversation_id)
            while len(self.renders) > self.size:
                self.renders.popitem(last=False)


# This process's pushes kept for other tabs: at most ~8 M characters in all.
shared_renders = SharedRenders(size=128, max_chars=64_000)
