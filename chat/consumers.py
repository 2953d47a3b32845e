"""The conversation websocket: transport only.

The client says which change it has seen (`{"type": "sync", "after": N}`) when the socket
opens, including after every reconnect. From then on, each `chat.changed` event makes the
consumer re-read what changed after the last change it sent and push the same partials the
page renders: new messages are appended, changed ones replaced in place. A dropped
connection, a lost event or a burst of events all end the same way: no gaps, no duplicates.

While the agent streams, a draft message already on the page gets only its new text: an
append to the draft's text (escaped, never rendered as markdown), so the bytes sent grow with
the reply's length, not its square. The finished message is rendered once, in full, when the
step completes. What a tab has of each draft is known for this connection only: a new or
reconnected socket gets each draft whole first, then its appends. The change's event carries
the appended text (chat.transcript.stream_into_draft), so a tab that has every change before
it forwards the text without reading the database; any other tab catches up the usual way.
The runner also sends each batch just before it writes it (`chat.streamed`, chat.runtime
.StreamWriter): a tab that has the draft up to there shows it at once, and takes the change
that follows as already shown.

Tabs open on the same conversation usually stand at the same change, with the same drafts:
the first of them to push a change renders it, and each other tab in that same state sends
the same fragments (SharedRenders), after checking its own session, without reading the
database or rendering again. The state includes the user, so the render that tab made read
the conversation as this user's, after the change; and the conversation's creation time,
read when this socket opened, tells it is still the same one (an id can be taken again after
a delete). A conversation deleted since is noticed by the next push, which reads it.

Sub-agents (chat.subagents) stream into their parent's page: each change of a child is also
announced to the parent's group (`chat.subagent_changed`), and the consumer then pushes the
status and transcript of every child changed since the child cursor it last sent.
"""

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.html import format_html

from chat import sessions
from chat.errors import ConversationNotFound
from chat.events import EVENTS_LAYER, DirectDispatch, conversation_group, user_group
from chat.models import AgentState, Conversation
from chat.selectors import conversation_for_user, transcript_changes
from chat.subagents import changed_subagents
from chat.transcript import draft_text

# Close codes in the private range: the page does not reconnect after them.
CLOSE_NOT_FOUND = 4404
CLOSE_SIGNED_OUT = 4401
# While a turn runs, check again this long after each push, in case its last event was
# dropped (channel layers drop messages to a full queue).
RECHECK_SECONDS = 1.5
# A push reads the session again first unless it was read this recently. `auth.changed` closes
# the socket at once; without it (a dropped event), an ended session is noticed within
# AUTH_RECHECK_SECONDS either way: by `watch_session` on a quiet socket, by the next push on a
# busy one. A streaming tab is spared a session read for each of its many pushes a second.
SESSION_FRESH_SECONDS = sessions.AUTH_RECHECK_SECONDS


class SignedOut(Exception):
    pass


@dataclass(frozen=True)
class Render:
    """A push rendered for a tab in `state` (ConversationConsumer.tab_state) of the conversation
    created at `created_at` (an id can be taken again after a delete): what it sent, its new
    cursor, whether a turn was running, and the tab's state after it."""

    created_at: datetime
    state: tuple
    html: str
    cursor: int
    running: bool
    drafts: dict[int, str]
    header: bytes
    header_key: tuple | None
    subagents: dict[int, int]


class SharedRenders:
    """The latest push rendered for a change of each conversation in this process, for the
    other tabs in the state it was rendered for. Reused only for a change it covers (its cursor
    is at or past the change's), so a tab that takes it still gets every later change by its own
    event. Kept for `size` conversations at most, and only pushes of up to `max_chars` (with the
    drafts they leave the tab): a catch-up of a whole transcript is one tab's alone. Pushes
    render on the one push thread (push_changes); the lock keeps it whole regardless."""

    def __init__(self, size: int, max_chars: int) -> None:
        self.size = size
        self.max_chars = max_chars
        self.renders: OrderedDict[int, Render] = OrderedDict()
        self.lock = threading.Lock()

    def get(
        self, conversation_id: int, created_at: datetime, state: tuple, upto: int
    ) -> Render | None:
        """The push for a tab in `state` that covers change `upto` of the conversation
        `conversation_id` created at `created_at`, if one was just rendered."""
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
        # The drafts before the push (in `state`) are no longer than those after it.
        chars = len(render.html) + 2 * sum(map(len, render.drafts.values()))
        if chars > self.max_chars:
            return
        with self.lock:
            self.renders[conversation_id] = render
            self.renders.move_to_end(conversation_id)
            while len(self.renders) > self.size:
                self.renders.popitem(last=False)


# The thread every push of this process renders on (on_push_thread).
_push_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-push")


def on_push_thread(render):
    """`render` (sync, reads the database) to await on the process's push thread: a thread of
    its own, so pushes wait for nothing else the process's shared sync thread does (sockets'
    connects and session reads, the sweep), and hold one database connection at most (a
    thread per push, from the loop's executor, kept one of the bounded pool each for good:
    found exhausting it on PostgreSQL)."""
    return database_sync_to_async(render, thread_sensitive=False, executor=_push_thread)


# Pushes kept for other tabs: at most ~8 M characters in all.
shared_renders = SharedRenders(size=128, max_chars=64_000)


def header_key(conversation: Conversation, cursor: int) -> tuple:
    """What the page's header (chat/conversation.html#header: title, turn actions, status)
    is rendered from: not rendered again for a push while it is the same (a quarter of a
    push's rendering, measured under load). Its turn actions (Regenerate, Edit) read the
    transcript when no turn runs or waits, so every change counts then."""
    idle = conversation.agent_state in (AgentState.IDLE, AgentState.ERROR)
    return (str(conversation), conversation.agent_state, cursor if idle else None)


def header_digest(html: str) -> bytes:
    """What a tab keeps of the header it was sent, to tell whether a new render differs: the
    HTML itself (~1.4 KB) was a thirtieth of an idle socket's memory."""
    return hashlib.blake2b(html.encode(), digest_size=16).digest()


def append_html(draft_id: int, text: str) -> str:
    """The push that adds `text` (escaped) to the end of a streaming draft on the page."""
    return format_html('<div hx-swap-oob="beforeend:#draft-{}">{}</div>', draft_id, text)


class SignedInConsumer(DirectDispatch, AsyncWebsocketConsumer):
    """A socket of one signed-in user that closes when their session ends (chat.sessions):
    at once on `auth.changed` in the user's group, and at the latest after
    AUTH_RECHECK_SECONDS. Subclasses set `self.user`, `self.pushing` (held while sending) and
    `self.watch` (watch_session's timer, or its task while it reads)."""

    channel_layer_alias = EVENTS_LAYER
    session_read_at = float("-inf")  # time.monotonic() of the last read that found it good

    async def attention_changed(self, event: dict) -> None:
        """Meant for the user's live channel (questions.consumers, in the attention group).
        A process of an earlier release sends it to the whole user group: ignored here."""

    async def questions_reminder(self, event: dict) -> None:
        """As attention_changed: a reminder (questions.services.send_reminder) is the live
        channel's; conversation pages show the deadline already."""

    def wants_fragment(self, event: dict) -> bool:
        """Whether this page shows the conversation a `chat.fragment` is for."""
        return False

    async def chat_fragment(self, event: dict) -> None:
        """A fragment for a conversation's pages (chat.events.conversation_fragment), e.g.
        that a question is being answered in another tab."""
        if not self.wants_fragment(event):
            return
        with translation.override(self.language):
            html = render_to_string(event["template"], event["context"])
        async with self.pushing:
            if not getattr(self, "signed_out", False):
                await self.send(text_data=html)

    async def auth_changed(self, event: dict) -> None:
        """The user's credentials changed (chat.sessions): close unless this session is
        still good."""
        if sessions.ended_here(event, self.session_key()) or not await self.session_valid(
            shared=False
        ):
            await self.sign_out()

    async def join(self, *groups: str) -> None:
        """Listen on these channel-layer groups (left again on disconnect)."""
        self.groups_joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        for task in (getattr(self, "recheck", None), getattr(self, "watch", None)):
            if task is not None:
                task.cancel()
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    def watch_session(self) -> None:
        """The safety net under `auth.changed` (a channel layer may drop it): read the session
        again once the last read of it is AUTH_RECHECK_SECONDS old (pushes read it too). An
        idle socket holds a timer for it, not a task: the read another socket of the session
        made usually answers on the spot (shared_read), and a task is started only to read."""
        self.watch_started = time.monotonic()
        self.session_due()

    def session_due(self) -> None:
        last = max(self.watch_started, self.session_read_at)  # a push may have read it
        wait = last + sessions.AUTH_RECHECK_SECONDS - time.monotonic()
        if wait > 0:
            self.watch = asyncio.get_running_loop().call_later(wait, self.session_due)
        elif (read := self.shared_read()) is not None and self.take_read(read):
            self.session_due()  # good as of that read: due again a beat after it
        else:
            self.watch = asyncio.create_task(self.read_session_due())

    async def read_session_due(self) -> None:
        if await self.session_valid():
            self.session_due()
        else:
            await self.sign_out()

    async def session_valid(self, *, shared: bool = True) -> bool:
        """Whether the session still signs this user in (session_still_valid), without a
        trip to the sync thread when another socket's read answers."""
        if shared and (read := self.shared_read()) is not None:
            return self.take_read(read)
        return await database_sync_to_async(self.session_still_valid)(shared=shared)

    def session_still_valid(self, *, shared: bool = True) -> bool:
        """Read the session; `shared`: a read that this process's other sockets of the
        session made recently enough (shared_read) answers instead."""
        # Without a session in the scope (tests that set the user themselves), the user is all
        # there is; config.asgi always puts the consumer behind AuthMiddlewareStack.
        if "session" not in self.scope:
            return self.take_read((time.monotonic(), self.user.pk))
        read = self.shared_read() if shared else None
        return self.take_read(read or sessions.session_reads.read(self.session_key()))

    def shared_read(self) -> tuple[float, int | None] | None:
        """A read of this socket's session by any socket of this process
        (sessions.SessionReads), as fresh as session_fresh and watch_session require."""
        key = self.session_key()
        if not key or "session" not in self.scope:
            return None
        within = min(SESSION_FRESH_SECONDS, sessions.AUTH_RECHECK_SECONDS)
        return sessions.session_reads.recent(key, within=within)

    def take_read(self, read: tuple[float, int | None]) -> bool:
        """Whether `read` (sessions.SessionReads) signs this user in; if so, the socket's
        session is good as of when it was read."""
        read_at, user_id = read
        valid = user_id == self.user.pk
        if valid:
            self.session_read_at = max(self.session_read_at, read_at)
        return valid

    def session_fresh(self) -> bool:
        """Whether the session was found good within the last SESSION_FRESH_SECONDS."""
        return time.monotonic() - self.session_read_at < SESSION_FRESH_SECONDS

    async def sign_out(self) -> None:
        async with self.pushing:  # after a push in progress, and before any other
            self.signed_out = True
            await self.close(code=CLOSE_SIGNED_OUT)
        if self.watch is not None and self.watch is not asyncio.current_task():
            self.watch.cancel()

    def session_key(self) -> str | None:
        session = self.scope.get("session")
        return getattr(session, "session_key", None)

    def check_session(self) -> None:
        """Raise SignedOut once the session no longer signs this user in (logout, password
        change, deactivation): checked before every push (read again unless it was read in
        the last SESSION_FRESH_SECONDS), so nothing more is sent."""
        if not self.session_fresh() and not self.session_still_valid():
            raise SignedOut

    @cached_property
    def language(self) -> str:
        """The language the page itself was rendered in (LocaleMiddleware's rules; what they
        read, the handshake's cookies and headers, stays as it was for the socket's life)."""
        request = HttpRequest()
        request.COOKIES = self.scope.get("cookies", {})
        for name, value in self.scope.get("headers", []):
            if name == b"accept-language":
                request.META["HTTP_ACCEPT_LANGUAGE"] = value.decode("latin-1")
        return translation.get_language_from_request(request)


class ConversationConsumer(SignedInConsumer):
    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        self.sent_seq: int | None = None  # unknown until the client says what it has
        self.sent_subagents: dict[int, int] = {}  # child id -> the child's cursor sent
        self.sent_drafts: dict[int, str] = {}  # draft message id -> the text this tab has
        self.sent_header = b""  # the title and status as last sent (header_digest)
        self.header_key: tuple | None = None  # what sent_header was rendered from (header_key)
        self.pushing = asyncio.Lock()  # one push at a time: each reads from the last cursor
        self.recheck: asyncio.Task | None = None
        self.watch: asyncio.TimerHandle | asyncio.Task | None = None
        try:
            conversation = await database_sync_to_async(conversation_for_user)(
                user=self.user, conversation_id=self.conversation_id
            )
        except ConversationNotFound:
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        self.created_at = conversation.created_at  # which conversation this id is (SharedRenders)
        await self.join(conversation_group(self.conversation_id), user_group(self.user.pk))
        await self.accept()
        self.watch_session()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "")
            after = int(data["after"]) if data.get("type") == "sync" else None
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            after = None
        if after is None or after < 0:
            return  # the only message a client sends is a sync; anything else is ignored
        self.sent_seq = after
        await self.push_changes()

    def wants_fragment(self, event: dict) -> bool:
        return event["conversation_id"] == self.conversation_id

    async def chat_changed(self, event: dict) -> None:
        if self.sent_seq is None or event["seq"] <= self.sent_seq:
            return
        if "appended" in event and await self.push_appended(event["seq"], event["appended"]):
            return
        await self.push_changes(upto=event["seq"])

    async def push_appended(self, seq: int, appended: dict) -> bool:
        """Send text streamed into a draft as the event carries it, with no database read and
        no template, when this tab has every change before it. False: push the usual way."""
        draft_id = appended["message"]
        async with self.pushing:
            if getattr(self, "signed_out", False):
                return True
            sent = self.sent_drafts.get(draft_id)
            at, text = appended["at"], appended["text"]
            if self.sent_seq != seq - 1 or sent is None or not self.session_fresh():
                return False
            if len(sent) == at + len(text) and sent.endswith(text):
                self.sent_seq = seq  # shown ahead of its change (chat_streamed)
            elif len(sent) == at:
                self.sent_drafts[draft_id] = sent + text
                self.sent_seq = seq
                await self.send(text_data=append_html(draft_id, text))
            else:
                return False
        self.recheck_later()
        return True

    async def chat_streamed(self, event: dict) -> None:
        """Text the runner is about to store in a draft (chat.events.draft_streamed): shown
        now by a tab that has that draft up to where it goes, with no database read; the
        change that stores it follows (push_appended). Any other tab waits for that change."""
        draft_id = event["message"]
        async with self.pushing:
            if getattr(self, "signed_out", False) or not self.session_fresh():
                return
            sent = self.sent_drafts.get(draft_id)
            if sent is None or len(sent) != event["at"]:
                return
            self.sent_drafts[draft_id] = sent + event["text"]
            await self.send(text_data=append_html(draft_id, event["text"]))

    async def chat_subagent_changed(self, event: dict) -> None:
        if self.sent_seq is not None and event["seq"] > self.sent_subagents.get(
            event["child_id"], -1
        ):
            await self.push_changes()

    async def push_changes(self, upto: int | None = None) -> None:
        """Push what changed after the tab's cursor (`upto`: the change that asks for it;
        nothing to do if a push made while it waited for its turn covered it)."""
        async with self.pushing:
            if getattr(self, "signed_out", False):
                return
            if upto is not None and self.sent_seq is not None and upto <= self.sent_seq:
                return
            try:
                html, cursor, running = await on_push_thread(self.render_changes)(
                    self.sent_seq, upto
                )
            except ConversationNotFound:
                await self.close(code=CLOSE_NOT_FOUND)
                return
            except SignedOut:
                await self.close(code=CLOSE_SIGNED_OUT)
                return
            if html:
                self.sent_seq = cursor
                await self.send(text_data=html)
        if running:
            self.recheck_later()

    def recheck_later(self) -> None:
        if self.recheck is not None:
            self.recheck.cancel()
        self.recheck = asyncio.create_task(self.push_later())

    async def push_later(self) -> None:
        await asyncio.sleep(RECHECK_SECONDS)
        self.recheck = None
        await self.push_changes()

    def tab_state(self, after: int) -> tuple:
        """What a push to this tab depends on besides the database: who reads it, in which
        language, and what the tab already has."""
        return (
            self.user.pk,
            self.language,
            after,
            tuple(sorted(self.sent_drafts.items())),
            self.sent_header,
            tuple(sorted(self.sent_subagents.items())),
        )

    def render_changes(self, after: int, upto: int | None = None) -> tuple[str, int, bool]:
        """The OOB fragments for everything changed after `after`, the new cursor, and
        whether a turn is running. `upto`: the change that asks for the push; a push another
        tab in this tab's state just got is sent again if it covers that change."""
        self.check_session()
        state = self.tab_state(after)
        if upto is not None and (
            shared := shared_renders.get(self.conversation_id, self.created_at, state, upto)
        ):
            self.sent_drafts = dict(shared.drafts)
            self.sent_header = shared.header
            self.header_key = shared.header_key
            self.sent_subagents = dict(shared.subagents)
            return shared.html, shared.cursor, shared.running
        parent = conversation_for_user(
            user=self.user, conversation_id=self.conversation_id, flag_children=True
        )
        if upto is None:  # a sync or a re-check: this tab's own catch-up
            return self.render_fresh(parent, after)
        html, cursor, running = self.render_fresh(parent, after)
        shared_renders.put(
            self.conversation_id,
            Render(
                created_at=parent.created_at,
                state=state,
                html=html,
                cursor=cursor,
                running=running,
                drafts=dict(self.sent_drafts),
                header=self.sent_header,
                header_key=self.header_key,
                subagents=dict(self.sent_subagents),
            ),
        )
        return html, cursor, running

    def render_fresh(self, parent: Conversation, after: int) -> tuple[str, int, bool]:
        """render_changes, rendered for this tab, from `parent`: the conversation just read
        (through conversation_for_user with flag_children)."""
        # Children first: one that exists now is also in the parent's changes read after it
        # (or already on the page), so its section is there for the pushed parts to replace.
        subagents = changed_subagents(parent, self.sent_subagents) if parent.has_children else []
        changes = transcript_changes(
            user=self.user, conversation_id=self.conversation_id, after=after, first=parent
        )
        running = changes.conversation.is_running
        if changes.cursor == after and not subagents:
            return "", after, running
        messages, appends = self.split_appends(changes.messages)
        context = {"conversation": changes.conversation, "after": after, "oob": True}
        with translation.override(self.language):
            header, digest = "", self.sent_header
            if (key := header_key(changes.conversation, changes.cursor)) != self.header_key:
                header = render_to_string("chat/conversation.html#header", context)
                self.header_key = key
                if (digest := header_digest(header)) == self.sent_header:
                    header = ""
            html = render_to_string(
                "chat/conversation.html#changes",
                {
                    **context,
                    "changes": changes,
                    "messages": messages,
                    "appends": appends,
                    "subagents": subagents,
                    "header": header,
                    # A push of appends alone leaves the page's cursor where it was: a tab
                    # that reconnects from there gets those drafts whole, and nothing twice.
                    "send_cursor": bool(messages or subagents or header),
                },
            )
        self.sent_header = digest
        self.sent_subagents.update({s.pk: s.conversation.seq for s in subagents})
        return html.strip(), changes.cursor, running

    def split_appends(self, changed: list) -> tuple[list, list[str]]:
        """The changed messages to render whole, and the append (append_html) for each draft
        whose text only grew since this tab got it. Remembers what the tab now has."""
        messages, appends = [], []
        for message in changed:
            text = draft_text(message)
            sent = self.sent_drafts.get(message.pk)
            if text is not None and sent is not None and text.startswith(sent):
                if len(text) > len(sent):
                    appends.append(append_html(message.pk, text[len(sent) :]))
            else:
                messages.append(message)
            if text is None:
                self.sent_drafts.pop(message.pk, None)
            else:
                self.sent_drafts[message.pk] = text
        return messages, appends
