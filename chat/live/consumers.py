"""The conversation websocket: transport only.

The client says which change it has seen (`{"type": "sync", "after": N}`) when the socket
opens, including after every reconnect. From then on, each `chat.changed` event makes the
consumer re-read what changed after the last change it sent and push the same partials the
page renders: new messages are appended, changed ones replaced in place. A dropped
connection, a lost event or a burst of events all end the same way: no gaps, no duplicates.

While the agent streams, a draft message already on the page gets only its new text: an
append to the draft's text (escaped, never rendered as markdown), so the bytes sent grow with
the reply's length, not its square; the finished message is rendered once, in full. What a
tab has of each draft is known for this connection only: a new or reconnected socket gets
each draft whole first, then its appends. A change that only appends carries the new text
(chat.transcript.Transcript.stream_into_draft), and the runner sends each batch just before it
stores it (`chat.streamed`): a tab that has the draft up to there shows it at once, with no
database read.

Sub-agents stream into their parent's page: each change of a child is also announced to the
parent's group (`chat.subagent_changed`), and the consumer then pushes the status and
transcript of every child changed since the child cursor it last sent.

A card that waits for a person may show state the transcript does not hold (whom a question
waits for, who may answer it: the apps above chat keep it in rows of their own). When that
changes, nothing in the transcript does: `chat.refresh` names the messages, and the consumer
renders them again as they are now. A page says in its sync when its socket opened again
(`"again": true`): it may have missed such a refresh while it was down, so its live cards
(chat.engine.tools.live_card_messages) are rendered again too.
"""

import asyncio
import json
import logging
import time
from functools import cached_property

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.html import format_html

from chat.engine.tools import live_card_messages
from chat.errors import ConversationNotFound
from chat.live import sessions
from chat.live.renders import Render, shared_renders
from chat.models import AgentState, Conversation
from chat.selectors import (
    PAGE_MESSAGES,
    changed_subagents,
    conversation_exists,
    conversation_for_user,
    conversation_page,
    messages_shown,
    role_of,
    transcript_changes,
)
from chat.transcript import draft_text
from core.events import EVENTS_LAYER, conversation_group, user_group

logger = logging.getLogger("parley.events")

# Close codes in the private range: the page does not reconnect after them.
CLOSE_NOT_FOUND = 4404
CLOSE_SIGNED_OUT = 4401
CLOSE_TOO_MANY_SOCKETS = 4429
# The conversation's owner removed this user from it (the page says so), or changed their
# role (the page loads again, as the new role shows it).
CLOSE_NO_ACCESS = 4403
CLOSE_ROLE_CHANGED = 4409
# While a turn runs, check again this long after each push, in case its last event was
# dropped (channel layers drop messages to a full queue).
RECHECK_SECONDS = 1.5


class SignedOut(Exception):
    pass


def append_html(draft_id: int, text: str) -> str:
    """The push that adds `text` (escaped) to the end of a streaming draft on the page."""
    return format_html('<div hx-swap-oob="beforeend:#draft-{}">{}</div>', draft_id, text)


def header_key(conversation: Conversation, cursor: int) -> tuple:
    """What the page's header (chat/conversation.html#header: title, turn actions, status)
    is rendered from: not rendered again for a push while it is the same. Its turn actions
    (Regenerate, Edit) read the transcript when no turn runs or waits, so every change counts
    then."""
    idle = conversation.agent_state in (AgentState.IDLE, AgentState.ERROR)
    return (str(conversation), conversation.agent_state, cursor if idle else None)


class OpenSockets:
    """The websockets each user holds open on this process (PARLEY_MAX_SOCKETS at most).
    Only the event loop's thread takes and gives back, so no lock is needed."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def take(self, user_id: int) -> bool:
        limit = settings.PARLEY_MAX_SOCKETS
        count = self.counts.get(user_id, 0)
        if limit > 0 and count >= limit:
            return False
        self.counts[user_id] = count + 1
        return True

    def give_back(self, user_id: int) -> None:
        count = self.counts.get(user_id, 0) - 1
        if count > 0:
            self.counts[user_id] = count
        else:
            self.counts.pop(user_id, None)


open_sockets = OpenSockets()


class SignedInConsumer(AsyncWebsocketConsumer):
    """A socket of one signed-in user that closes when their session ends: at once on
    `auth.changed` in the user's group, and at the latest AUTH_RECHECK_SECONDS after its last
    good read of the session (each push reads it when older). Subclasses set `self.user`."""

    channel_layer_alias = EVENTS_LAYER

    async def dispatch(self, message: dict) -> None:
        """Call the message's handler, as Channels' AsyncConsumer.dispatch does, but

        - without its trip to the process's sync thread to close stale database connections
          before every handler: each database read here goes through database_sync_to_async,
          which does that itself, so an event that reads nothing (a streamed append) does not
          wait for that thread while it renders or runs a turn's step;
        - ignoring an event it has no handler for (sent to a group it is in by another
          release's process, during a rolling upgrade): events are hints that the next change
          or re-check catches up on, where Channels would end the socket."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            logger.debug("ignored an event of unknown type %s", message.get("type"))
            return
        await handler(message)

    async def websocket_connect(self, message) -> None:
        self.pushing = asyncio.Lock()  # one push at a time; sign_out waits for it
        self.signed_out = False
        self.session_read_at = time.monotonic()  # the handshake authenticated it just now
        self.watch: asyncio.Task | None = None
        self.groups_joined: tuple[str, ...] = ()
        self.counted = False  # holds one of the user's open sockets (open_sockets)
        await super().websocket_connect(message)

    async def join(self, *groups: str) -> bool:
        """Listen on these channel-layer groups (left again on disconnect), and start
        watching the session. False when the user already holds PARLEY_MAX_SOCKETS open
        here: the socket is accepted and closed at once, with a code the page explains."""
        if not open_sockets.take(self.user.pk):
            await self.accept()
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return False
        self.counted = True
        self.groups_joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        self.watch = asyncio.create_task(self.watch_session())
        return True

    async def disconnect(self, code: int) -> None:
        if self.counted:
            self.counted = False
            open_sockets.give_back(self.user.pk)
        if self.watch is not None:
            self.watch.cancel()
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def watch_session(self) -> None:
        """The safety net under `auth.changed` (a channel layer may drop it): read the session
        again once the last read of it is AUTH_RECHECK_SECONDS old."""
        while True:
            due = self.session_read_at + sessions.AUTH_RECHECK_SECONDS - time.monotonic()
            if due > 0:
                await asyncio.sleep(due)
            elif not await database_sync_to_async(self.session_still_valid)():
                await self.sign_out()
                return

    def session_still_valid(self, *, afresh: bool = False) -> bool:
        """Whether the session still signs this user in: as read by any socket of it in this
        process within AUTH_RECHECK_SECONDS (sessions.SessionReads), or, `afresh`, now."""
        # Without a session in the scope (tests that set the user themselves), the user is all
        # there is; config.asgi always puts the consumer behind AuthMiddlewareStack.
        if "session" not in self.scope:
            self.session_read_at = time.monotonic()
            return True
        key = self.session_key()
        if not key:
            return False
        read = None if afresh else sessions.session_reads.recent(key)
        read_at, user_id = read or sessions.session_reads.read(key)
        if user_id != self.user.pk:
            return False
        self.session_read_at = read_at
        return True

    def check_session(self) -> None:
        """Raise SignedOut once the session no longer signs this user in (logout, password
        change, deactivation); read again unless read in the last AUTH_RECHECK_SECONDS."""
        fresh = time.monotonic() - self.session_read_at < sessions.AUTH_RECHECK_SECONDS
        if not fresh and not self.session_still_valid():
            raise SignedOut

    def session_key(self) -> str | None:
        return getattr(self.scope.get("session"), "session_key", None)

    async def auth_changed(self, event: dict) -> None:
        """The user's credentials changed: close unless this session is still good."""
        if sessions.ended_here(event, self.session_key()) or not await database_sync_to_async(
            self.session_still_valid
        )(afresh=True):
            await self.sign_out()

    async def sign_out(self) -> None:
        async with self.pushing:  # after a push in progress, and before any other
            self.signed_out = True
            await self.close(code=CLOSE_SIGNED_OUT)

    async def send_pushed(self, html: str) -> None:
        """Send a push unless the socket signed out meanwhile (the caller holds `pushing`)."""
        if not self.signed_out and html:
            await self.send(text_data=html)

    def wants_fragment(self, event: dict) -> bool:
        """Whether this page shows the conversation a `chat.fragment` is for."""
        return False

    async def chat_fragment(self, event: dict) -> None:
        """A fragment for a conversation's pages (core.events.conversation_fragment)."""
        if not self.wants_fragment(event):
            return
        with translation.override(self.language):
            html = render_to_string(event["template"], event["context"])
        async with self.pushing:
            await self.send_pushed(html)

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
        self.header_key: tuple | None = None  # what the header last sent was rendered from
        self.refresh_after_sync: set[int] = set()  # messages to render again once synced
        self.recheck: asyncio.Task | None = None
        try:
            conversation = await database_sync_to_async(conversation_for_user)(
                user=self.user, conversation_id=self.conversation_id
            )
        except ConversationNotFound:
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        self.created_at = conversation.created_at  # which conversation this id is (renders)
        self.role = conversation.viewer_role
        if await self.join(conversation_group(self.conversation_id), user_group(self.user.pk)):
            await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.recheck is not None:
            self.recheck.cancel()
        await super().disconnect(code)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "")
            after = int(data["after"]) if data.get("type") == "sync" else None
            again = data.get("again") is True
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            after = None
        if after is None or after < 0:
            return  # the only message a client sends is a sync; anything else is ignored
        self.sent_seq = after
        await self.push_changes()
        # Refreshes that came before the sync; after a reconnect, every live card (a refresh
        # sent while the socket was down never reached it).
        missed, self.refresh_after_sync = self.refresh_after_sync, set()
        if again or missed:
            await self.push_refreshed(None if again else sorted(missed))

    def wants_fragment(self, event: dict) -> bool:
        return event["conversation_id"] == self.conversation_id

    async def chat_access_changed(self, event: dict) -> None:
        """The user's access to a conversation changed (chat.sharing): this socket closes if
        it was this one's and the user lost it, or their role changed."""
        if event["conversation_id"] != self.conversation_id:
            return
        role = await database_sync_to_async(role_of)(
            user=self.user, conversation_id=self.conversation_id
        )
        if role == self.role:
            return
        async with self.pushing:
            self.signed_out = True  # nothing more is pushed to it
            await self.close(code=CLOSE_NO_ACCESS if role is None else CLOSE_ROLE_CHANGED)

    async def chat_changed(self, event: dict) -> None:
        if self.sent_seq is None or event["seq"] <= self.sent_seq:
            return
        if "appended" in event and await self.push_appended(event["seq"], event["appended"]):
            return
        await self.push_changes(upto=event["seq"])

    async def push_appended(self, seq: int, appended: dict) -> bool:
        """Send text streamed into a draft as the event carries it, with no database read and
        no template, when this tab has every change before it. False: push the usual way."""
        draft_id, at, text = appended["message"], appended["at"], appended["text"]
        async with self.pushing:
            if self.signed_out:
                return True
            sent = self.sent_drafts.get(draft_id)
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

    async def chat_refresh(self, event: dict) -> None:
        """Messages whose cards show state outside the transcript that changed
        (core.events.refresh): rendered again as they are now, once the tab has synced."""
        if event["conversation_id"] != self.conversation_id:
            return
        if self.sent_seq is None:
            self.refresh_after_sync.update(event["messages"])
            return
        await self.push_refreshed(event["messages"])

    async def push_refreshed(self, message_ids: list[int] | None) -> None:
        """Push these messages again (None: the conversation's live cards)."""
        async with self.pushing:
            if self.signed_out:
                return
            html = await self.rendered(self.render_refreshed, message_ids)
            if html:
                await self.send(text_data=html)

    async def chat_streamed(self, event: dict) -> None:
        """Text the runner is about to store in a draft (core.events.draft_streamed):
        shown now by a tab that has that draft up to where it goes; the change that stores it
        follows (push_appended). Any other tab waits for that change."""
        draft_id = event["message"]
        async with self.pushing:
            if self.signed_out or not self.session_fresh():
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

    def session_fresh(self) -> bool:
        return time.monotonic() - self.session_read_at < sessions.AUTH_RECHECK_SECONDS

    async def push_changes(self, upto: int | None = None) -> None:
        """Push what changed after the tab's cursor (`upto`: the change that asks for it;
        nothing to do if a push made while it waited for its turn covered it)."""
        async with self.pushing:
            if self.signed_out or (upto is not None and upto <= self.sent_seq):
                return
            pushed = await self.rendered(self.render_changes, self.sent_seq, upto)
            if pushed is None:
                return
            html, cursor, running = pushed
            if html:
                self.sent_seq = cursor
                await self.send(text_data=html)
        if running:
            self.recheck_later()

    async def rendered(self, render, *args):
        """`render(*args)`, on a thread that may read the database; None once the socket is
        closed instead: the user may no longer read the conversation, or signed out."""
        try:
            return await database_sync_to_async(render)(*args)
        except ConversationNotFound:
            there = await database_sync_to_async(conversation_exists)(self.conversation_id)
            await self.close(code=CLOSE_NO_ACCESS if there else CLOSE_NOT_FOUND)
        except SignedOut:
            self.signed_out = True
            await self.close(code=CLOSE_SIGNED_OUT)
        return None

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
            self.header_key,
            tuple(sorted(self.sent_subagents.items())),
        )

    def render_changes(self, after: int, upto: int | None = None) -> tuple[str, int, bool]:
        """The OOB fragments for everything changed after `after`, the new cursor, and
        whether a turn is running. `upto`: the change that asks for the push; a push another
        tab in this tab's state just got (chat.live.renders) is sent again if it covers it."""
        self.check_session()
        state = self.tab_state(after)
        if upto is not None and (
            shared := shared_renders.get(self.conversation_id, self.created_at, state, upto)
        ):
            self.sent_drafts = dict(shared.drafts)
            self.header_key = shared.header_key
            self.sent_subagents = dict(shared.subagents)
            return shared.html, shared.cursor, shared.running
        html, cursor, running = self.render_fresh(after)
        if upto is not None:  # not a sync or a re-check: a change other tabs get too
            shared_renders.put(
                self.conversation_id,
                Render(
                    created_at=self.created_at,
                    state=state,
                    html=html,
                    cursor=cursor,
                    running=running,
                    drafts=dict(self.sent_drafts),
                    header_key=self.header_key,
                    subagents=dict(self.sent_subagents),
                ),
            )
        return html, cursor, running

    def render_fresh(self, after: int) -> tuple[str, int, bool]:
        """render_changes, read and rendered for this tab."""
        parent = conversation_for_user(user=self.user, conversation_id=self.conversation_id)
        # Children first: one that exists now is also in the parent's changes read after it
        # (or already on the page), so its section is there for the pushed parts to replace.
        subagents = changed_subagents(parent, self.sent_subagents) if parent.has_subagents else []
        changes = transcript_changes(
            user=self.user,
            conversation_id=self.conversation_id,
            after=after,
            first=parent,
            limit=PAGE_MESSAGES,
        )
        if not changes.complete:
            return self.render_newest_page(parent, subagents)
        conversation = changes.conversation
        running = conversation.is_running
        if changes.cursor == after and not subagents:
            return "", after, running
        messages, appends = self.split_appends(changes.messages)
        context = {"conversation": conversation, "after": after, "oob": True}
        with translation.override(self.language):
            header = ""
            if (key := header_key(conversation, changes.cursor)) != self.header_key:
                header = render_to_string("chat/conversation.html#header", context)
                self.header_key = key
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
        self.sent_subagents.update({s.pk: s.conversation.seq for s in subagents})
        return html.strip(), changes.cursor, running

    def render_refreshed(self, message_ids: list[int] | None) -> str:
        """The OOB fragments of these messages as they are now, those this tab has (None: the
        live cards of a conversation that waits for the person)."""
        self.check_session()
        conversation = conversation_for_user(user=self.user, conversation_id=self.conversation_id)
        if message_ids is None:
            waiting = conversation.agent_state == AgentState.AWAITING_USER
            message_ids = live_card_messages(conversation) if waiting else []
        messages = messages_shown(conversation, message_ids, upto=self.sent_seq)
        with translation.override(self.language):
            return "".join(
                render_to_string(
                    "chat/conversation.html#message",
                    {"conversation": conversation, "message": message, "oob": True},
                )
                for message in messages
            ).strip()

    def render_newest_page(self, parent, subagents: list) -> tuple[str, int, bool]:
        """For a tab that missed more changes than a page holds: the newest page in place of
        its transcript, as a page load renders it, rather than every change since."""
        page = conversation_page(user=self.user, conversation_id=self.conversation_id, first=parent)
        conversation = page.conversation
        context = {
            "conversation": conversation,
            "messages": page.messages,
            "earlier": page.earlier,
            "cursor": page.cursor,
            "oob": True,
        }
        with translation.override(self.language):
            html = "".join(
                render_to_string(f"chat/conversation.html#{part}", context)
                for part in ("transcript", "header", "cursor")
            )
        self.header_key = header_key(conversation, page.cursor)
        self.sent_drafts = {
            message.pk: text
            for message in page.messages
            if (text := draft_text(message)) is not None
        }
        self.sent_subagents.update({s.pk: s.conversation.seq for s in subagents})
        return html.strip(), page.cursor, conversation.is_running

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
