"""The only way events leave: to a channel-layer group, after commit.

Events are small dicts that say "this conversation changed up to seq N" (or what else
happened), never model instances. Consumers and streams re-read through the selectors and
render the same partials the page uses, so a lost or reordered event costs nothing: the next
one, a re-check or a reconnect catches up from the client's own cursor.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger("parley.events")

# The channel layer events travel on (settings.CHANNEL_LAYERS): every consumer and stream
# listens there. The turns sent to workers go over the default layer (chat.engine.dispatch).
EVENTS_LAYER = "events"


def conversation_group(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


def user_group(user_id: int) -> str:
    """Every open websocket and event stream of one user: `auth.changed` (chat.live.sessions)
    closes them, and `chat.fragment` reaches each page of its conversation."""
    return f"user.{user_id}"


def attention_group(user_id: int) -> str:
    """The user's live channels only (questions.consumers, one per open page): what waits for
    the user changed, or a question will expire soon. Kept apart from user_group, so that the
    user's conversation sockets and streams are not woken by each of these."""
    return f"attention.{user_id}"


def send_on_commit(group: str, event: dict) -> None:
    """Send `event` to `group` once the current transaction commits (at once outside one).
    A send that fails (a Redis blip) is logged, never turned into an error after the data is
    committed: the next change or a reconnect catches up."""
    transaction.on_commit(partial(send, group, event), robust=True)


# The event loop of this process's runner (chat.engine.runner binds it): sync code hands its
# events to it and goes on, instead of waiting for the loop to send them. A request's or a
# turn's thread would otherwise wait, with every commit, for a loop busy with other pages.
_loop: asyncio.AbstractEventLoop | None = None


def bind_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    global _loop
    _loop = loop


def send(group: str, event: dict) -> None:
    """Send `event` to `group` from sync code: handed to the process's event loop when it has
    one (events from one thread are sent in order), else sent before returning."""
    layer = get_channel_layer(EVENTS_LAYER)
    if layer is None:
        return
    loop = _loop
    if loop is not None and loop.is_running():
        sent = asyncio.run_coroutine_threadsafe(layer.group_send(group, event), loop)
        sent.add_done_callback(partial(_log_failure, group))
    else:
        async_to_sync(layer.group_send)(group, event)


def _log_failure(group: str, sent) -> None:
    if not sent.cancelled() and (error := sent.exception()) is not None:
        logger.warning("could not send an event to %s: %r", group, error)


async def publish(group: str, event: dict) -> None:
    """Send `event` to `group` now, from the event loop: for what is not a change of the
    database (draft_streamed), so waits for no commit."""
    layer = get_channel_layer(EVENTS_LAYER)
    if layer is not None:
        await layer.group_send(group, event)


# --- The events -----------------------------------------------------------------------------


def conversation_changed(conversation_id: int, seq: int, *, appended: dict | None = None) -> dict:
    """The conversation changed up to `seq`. `appended` ({"message": id, "at": offset,
    "text": new text}) says the change is only text added to a streaming draft: a consumer that
    has everything up to seq - 1, and that draft up to `at`, sends it on as it is."""
    event = {"type": "chat.changed", "conversation_id": conversation_id, "seq": seq}
    if appended is not None:
        event["appended"] = appended
    return event


STREAMED = "chat.streamed"


def draft_streamed(conversation_id: int, message_id: int, *, at: int, text: str) -> dict:
    """Text the turn's runner is about to add to a streaming draft whose stored text is `at`
    characters long (chat.engine.runtime.StreamWriter). Not a change: the change that stores
    it follows, so only a tab that has the draft up to `at` shows it now, and the waits and
    streams that read changes skip it (Subscription.wait)."""
    return {
        "type": STREAMED,
        "conversation_id": conversation_id,
        "message": message_id,
        "at": at,
        "text": text,
    }


def subagent_changed(parent_id: int, child_id: int, seq: int) -> dict:
    """Sent to the parent's group: a sub-agent's conversation changed up to its own `seq`
    (a cursor of the child's, not comparable with the parent's)."""
    return {
        "type": "chat.subagent_changed",
        "conversation_id": parent_id,
        "child_id": child_id,
        "seq": seq,
    }


def conversation_fragment(conversation_id: int, template: str, context: dict) -> dict:
    """A fragment for the open pages of one conversation, which each page's consumer renders
    in its own language (e.g. that a question is being answered in another tab). `template`
    and `context` come from server code only."""
    return {
        "type": "chat.fragment",
        "conversation_id": conversation_id,
        "template": template,
        "context": context,
    }


REFRESH = "chat.refresh"


def refresh(conversation_id: int, message_ids: list[int]) -> dict:
    """What the open pages of a conversation show of these messages changed outside the
    transcript: a card that waits for a person shows rows the transcript does not hold (whom
    a question waits for, who may answer it). Each page renders the messages again as they
    are now; neither they nor the change cursor changed, so the transcript's readers (event
    streams, waits) have nothing to read. A page that reconnects renders such cards again
    (chat.live.consumers), in case it missed this."""
    return {"type": REFRESH, "conversation_id": conversation_id, "messages": message_ids}


def attention_changed(user_id: int, conversation_id: int, *, waiting: bool = False) -> dict:
    """Sent to the user's attention group: `conversation_id` began (`waiting`) or stopped
    waiting for the user, so the number of questions waiting for them changed."""
    return {
        "type": "attention.changed",
        "user_id": user_id,
        "conversation_id": conversation_id,
        "waiting": waiting,
    }


ACCESS_CHANGED = "chat.access_changed"


def access_changed(user_id: int, conversation_id: int) -> dict:
    """Sent to the user's group: their access to `conversation_id` changed (a new conversation
    of theirs, from any tab or client; shared with them, another role, removed). Sockets and
    streams of it re-read their access, the live channel the sidebar and the count."""
    return {"type": ACCESS_CHANGED, "user_id": user_id, "conversation_id": conversation_id}


def auth_changed(user_id: int, *, session: str = "") -> dict:
    """The user's credentials changed: streams re-check theirs (`session`: the digest of a
    session that just ended)."""
    return {"type": "auth.changed", "user_id": user_id, "session": session}


# --- Server-side waits ----------------------------------------------------------------------

# Set when this process begins to shut down: every subscription stops waiting, so event
# streams and `wait` calls end with a response instead of being cut off.
_closing = asyncio.Event()


def close_subscriptions() -> None:
    """Called on the event loop when the process is asked to stop (config.serve)."""
    _closing.set()


class Subscription:
    """A channel of this process's own in a conversation's group."""

    def __init__(self, layer, channel: str) -> None:
        self.layer = layer
        self.channel = channel
        self.last_event: dict | None = None  # what the last successful wait received

    @property
    def closed(self) -> bool:
        """The process is shutting down: stop waiting and answer now."""
        return _closing.is_set()

    async def wait(self, seconds: float) -> bool:
        """Wait for the next change: True if one came, False after `seconds` (or at once when
        the process is shutting down). Text streamed ahead of its change is skipped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            receive = asyncio.ensure_future(self.layer.receive(self.channel))
            closing = asyncio.ensure_future(_closing.wait())
            try:
                done, _ = await asyncio.wait(
                    {receive, closing},
                    timeout=max(0.0, deadline - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                receive.cancel()
                closing.cancel()
            if receive not in done:
                return False
            event = receive.result()  # a failing layer fails the wait
            if event.get("type") != STREAMED:
                self.last_event = event
                return True


@asynccontextmanager
async def subscribe(*groups: str) -> AsyncIterator[Subscription]:
    """Join these groups for as long as the block runs (the server-side waits: the API's
    `wait`, its event stream, a parent turn waiting for its sub-agents)."""
    layer = get_channel_layer(EVENTS_LAYER)
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)
    try:
        yield Subscription(layer, channel)
    finally:
        for group in groups:
            await layer.group_discard(group, channel)
