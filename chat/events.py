"""The only way events leave: to the conversation's channel group, after commit.

Events are small dicts that say "this conversation changed up to seq N". Consumers re-read
through the selectors and render the same partials the page uses, so a lost or reordered event
costs nothing: the next one (or a reconnect) catches up from the client's own cursor.
"""

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from asgiref.sync import async_to_sync
from channels.consumer import get_handler_name
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger("parley.events")

# The channel layer events travel on (settings.CHANNEL_LAYERS): every consumer and stream
# listens there; the turns sent to workers go over the default one.
EVENTS_LAYER = "events"


def conversation_group(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


def user_group(user_id: int) -> str:
    """Every open websocket and event stream of one user: `auth.changed` (chat.sessions)
    closes them, and `chat.fragment` reaches each page of its conversation."""
    return f"user.{user_id}"


def attention_group(user_id: int) -> str:
    """The user's live channels only (questions.consumers, one per open page): what waits
    for the user changed (`attention.changed`), or a question will expire soon. Kept apart
    from user_group, so that a user's conversation sockets and event streams, which do
    nothing with these, are not woken by each of them."""
    return f"attention.{user_id}"


def send_conversation_event_on_commit(conversation_id: int, event: dict) -> None:
    """Push `event` to the conversation's group after commit. The events of one transaction
    leave together, and of several for one group and kind only the newest: each says
    "changed up to seq N", so the newest covers the others."""
    connection = transaction.get_connection()
    batch = getattr(connection, "parley_events", None)
    new = batch is None or not batch.pending(connection)
    if new:
        batch = connection.parley_events = _Batch()
    key = (conversation_id, event["type"], event.get("child_id"))
    batch.events.pop(key, None)  # re-inserted last: sent in the order of their newest change
    batch.events[key] = event
    if new:
        # robust: a push that fails (a Redis blip) is logged, never turned into an error
        # after the data is already committed; the next change or reconnect catches up.
        # (Outside a transaction this sends at once.)
        transaction.on_commit(batch.send, robust=True)


class _Batch:
    """The conversation events of one transaction, sent together after its commit."""

    def __init__(self) -> None:
        self.events: dict[tuple, dict] = {}

    def pending(self, connection) -> bool:
        """Whether this batch will still be sent (a rolled-back savepoint drops it)."""
        return any(callback == self.send for _, callback, _ in connection.run_on_commit)

    def send(self) -> None:
        _send_batch([(key[0], event) for key, event in self.events.items()])


def _send_batch(batch: list[tuple[int, dict]]) -> None:
    """Send (conversation id, event) pairs, in order."""
    _send([(conversation_group(conversation_id), event) for conversation_id, event in batch])


def send_user_event_on_commit(user_id: int, event: dict) -> None:
    transaction.on_commit(partial(_send_to_group, user_group(user_id), event), robust=True)


def send_attention_event_on_commit(user_id: int, event: dict) -> None:
    transaction.on_commit(partial(_send_to_group, attention_group(user_id), event), robust=True)


def _send_to_group(group: str, event: dict) -> None:
    _send([(group, event)])


def _send(messages: list[tuple[str, dict]]) -> None:
    """Send (group, event) pairs, in order: handed to the outbox of this process's event loop
    when it has one (serving processes and workers), else sent before returning."""
    layer = get_channel_layer(EVENTS_LAYER)
    if layer is None:
        return
    if _outbox is not None:
        _outbox.put(layer, messages)
    else:
        async_to_sync(_send_all)(layer, messages)


async def publish(conversation_id: int, event: dict) -> None:
    """Send `event` to the conversation's group now, from the event loop: for what is not a
    change of the database (draft_streamed), so waits for no commit."""
    layer = get_channel_layer(EVENTS_LAYER)
    if layer is None:
        return
    messages = [(conversation_group(conversation_id), event)]
    if _outbox is None:
        await _send_all(layer, messages)
    elif _outbox.loop is asyncio.get_running_loop():
        _outbox._put(layer, messages)  # at once, in order with the group's other events
    else:
        _outbox.put(layer, messages)


async def _send_all(layer, messages: list[tuple[str, dict]]) -> None:
    for group, event in messages:
        await layer.group_send(group, event)


class Outbox:
    """The events this process's threads commit, sent from its event loop.

    A commit (a request's, a turn step's) hands its events over and carries on: it does not
    wait for the channel layer, nor for a trip through the event loop and back (async_to_sync
    made a thread wait, then woke it, for every change of every turn and request). Each event
    is sent by a task of its own, after the one handed over before it for the same group, so
    a group gets its events in commit order while different groups' sends overlap (one send
    after another for the whole process queued every tab behind the busiest). A send that
    fails is logged, as a failing on_commit hook was; events are hints that the next change or
    a reconnect catches up on. Past MAX_PENDING unsent events (a channel layer that stopped
    answering), new ones are dropped, not kept in memory.
    """

    MAX_PENDING = 10_000

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[asyncio.Task] = set()
        self.last: dict[str, asyncio.Task] = {}  # each group's newest send
        self.dropping = False

    def put(self, layer, messages: list[tuple[str, dict]]) -> None:
        """From any thread."""
        self.loop.call_soon_threadsafe(self._put, layer, messages)

    def _put(self, layer, messages: list[tuple[str, dict]]) -> None:
        for group, event in messages:
            if len(self.pending) >= self.MAX_PENDING:
                if not self.dropping:  # once for each time it fills up
                    logger.warning("%s events unsent: dropping new ones", len(self.pending))
                self.dropping = True
                return
            self.dropping = False
            send = self._send(layer, group, event, after=self.last.get(group))
            task = self.loop.create_task(send, context=contextvars.Context())
            self.pending.add(task)
            self.last[group] = task
            task.add_done_callback(partial(self._sent, group))

    async def _send(self, layer, group: str, event: dict, *, after: asyncio.Task | None) -> None:
        if after is not None:
            await asyncio.wait([after])  # whatever became of it
        try:
            await layer.group_send(group, event)
        except Exception:
            logger.exception("could not send %s to %s", event.get("type"), group)

    def _sent(self, group: str, task: asyncio.Task) -> None:
        self.pending.discard(task)
        if self.last.get(group) is task:
            del self.last[group]

    async def flush(self, seconds: float) -> None:
        """Wait until what was handed over so far is sent (at most `seconds`)."""
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=seconds)


_outbox: Outbox | None = None


def start_outbox() -> None:
    """Send this process's events from the running event loop (chat.runner, at start)."""
    global _outbox
    if _outbox is None:
        _outbox = Outbox(asyncio.get_running_loop())


async def flush_outbox(seconds: float) -> None:
    """On shutdown: let the events committed so far leave before the process exits."""
    if _outbox is not None:
        await _outbox.flush(seconds)


class DirectDispatch:
    """A consumer's dispatch (channels.consumer.AsyncConsumer's) without its trip to the sync
    thread before every handler to close stale database connections
    (channels.db.aclose_old_connections): every read a handler makes goes through
    database_sync_to_async, which closes them before and after itself. For the pages' sockets
    that trip queued each event behind the renders on the one sync thread, even a streamed
    append that reads nothing; for a worker it was a thread hop for every turn sent to it.

    An event of a type this release does not know (sent by a later release's process, during
    a rolling upgrade) is ignored rather than fatal to the consumer: events are hints, and
    the next change or re-check catches up (a turn sent again by the sweep)."""

    async def dispatch(self, message: dict) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            logger.debug("ignored an event of unknown type %s", message.get("type"))
            return
        await handler(message)


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
    """Text the turn's runner is about to add to a streaming draft, whose stored text is `at`
    characters long (chat.runtime.StreamWriter). Not a change: the change that stores it
    follows, so only a tab that has the draft up to `at` shows it now (chat.consumers), and
    the waits and streams that read changes skip it (Subscription.wait)."""
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
    in its own language (a pause handler's live notice: chat pushes it without knowing what it
    says). `template` and `context` come from server code only."""
    return {
        "type": "chat.fragment",
        "conversation_id": conversation_id,
        "template": template,
        "context": context,
    }


def attention_changed(user_id: int, conversation_id: int, *, waiting: bool = False) -> dict:
    """Sent to the user's group: `conversation_id` began (`waiting`) or stopped waiting for the
    user (a pause began or was resolved), so the number of questions waiting for them changed."""
    return {
        "type": "attention.changed",
        "user_id": user_id,
        "conversation_id": conversation_id,
        "waiting": waiting,
    }


def auth_changed(user_id: int, *, session: str = "") -> dict:
    """The user's credentials changed: streams re-check theirs (`session`: the digest of a
    session that just ended)."""
    return {"type": "auth.changed", "user_id": user_id, "session": session}


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
            event = receive.result()  # a failing layer fails the wait, as before
            if event.get("type") != STREAMED:
                self.last_event = event
                return True


@asynccontextmanager
async def subscribe(
    conversation_id: int, *, user_id: int | None = None
) -> AsyncIterator[Subscription]:
    """Join the conversation's group (and with `user_id`, the user's) for as long as the
    block runs (the server-side waits: the API's `wait` and its event stream; consumers join
    through their own channel)."""
    layer = get_channel_layer(EVENTS_LAYER)
    channel = await layer.new_channel()
    groups = [conversation_group(conversation_id)]
    if user_id is not None:
        groups.append(user_group(user_id))
    for group in groups:
        await layer.group_add(group, channel)
    try:
        yield Subscription(layer, channel)
    finally:
        for group in groups:
            await layer.group_discard(group, channel)
