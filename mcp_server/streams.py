"""The events of this process's MCP response streams, kept for a client that reconnects with
Last-Event-ID (the SDK's EventStore): a call whose connection dropped while it waited gets its
answer on the resumed stream.

Kept in memory, like the sessions they belong to (the SDK keeps a session in the process that
opened it; deploy/nginx routes a session's requests there), and **per MCP session**: a stream's
id is the JSON-RPC request id, which is the same in every session (a client's first call is
id 2 everywhere), so an event is only ever replayed to a request of the session that stored it,
sent with the credential that opened it.

The SDK's EventStore interface names no session. The session is the ambient `SessionEvents` of
the request (`serving`, set by mcp_server.asgi around every authenticated request): the SDK
runs a session's message loop in tasks started by the request that opened it, and a task
starts with a copy of its creator's context variables (PEP 567, as asyncio and anyio
document), so the events that loop stores belong to that session. Without one (nothing should
store then) an event is kept for nobody and never replayed.

Bounded in count and in bytes (an event's JSON): per session, per user and in all. Past a
bound the oldest events go first (the session's own, for its bounds); an event larger than its
session's bound is sent live but not kept, so a resume after it carries what came later.
"""

import contextvars
import itertools
import uuid
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field

import pydantic_core
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

MAX_EVENTS = 10_000
MAX_SESSION_BYTES = 1 << 20
MAX_USER_BYTES = 4 << 20
MAX_BYTES = 64 << 20


@dataclass(eq=False)
class SessionEvents:
    """One MCP session's stored events, oldest first, and whose session it is (the SDK's
    principal: AccessToken.client_id)."""

    principal: str
    events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None, int]] = field(
        default_factory=OrderedDict
    )
    bytes: int = 0


_serving: contextvars.ContextVar[SessionEvents | None] = contextvars.ContextVar(
    "mcp_session_events", default=None
)


@contextmanager
def serving(session: SessionEvents):
    """Store and replay the events of this request (and of any task it starts) as `session`'s."""
    token = _serving.set(session)
    try:
        yield
    finally:
        _serving.reset(token)


class RecentEvents(EventStore):
    def __init__(
        self,
        *,
        max_events: int = MAX_EVENTS,
        max_session_bytes: int = MAX_SESSION_BYTES,
        max_user_bytes: int = MAX_USER_BYTES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.max_events = max_events
        self.max_session_bytes = max_session_bytes
        self.max_user_bytes = max_user_bytes
        self.max_bytes = max_bytes
        # Event ids are unique to this process's life: one from before a restart finds nothing.
        self._prefix = uuid.uuid4().hex[:12]
        self._numbers = itertools.count(1)
        # Every stored event, oldest first, with the session that holds it.
        self._events: OrderedDict[EventId, SessionEvents] = OrderedDict()
        self._user_bytes: Counter[str] = Counter()
        self.bytes = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        session = _serving.get() or SessionEvents(principal="")
        event_id = f"{self._prefix}-{next(self._numbers)}"
        size = len(pydantic_core.to_json(message)) if message is not None else 0
        if not self._make_room(session, size):
            message, size = None, 0  # sent live, never kept
        session.events[event_id] = (stream_id, message, size)
        session.bytes += size
        self._user_bytes[session.principal] += size
        self.bytes += size
        self._events[event_id] = session
        return event_id

    def _make_room(self, session: SessionEvents, size: int) -> bool:
        """Drop the oldest events until one of `size` bytes fits every bound; False if it
        cannot fit (it is larger than a bound, or the user's other sessions hold theirs)."""

        def over_own_bounds() -> bool:
            return (
                session.bytes + size > self.max_session_bytes
                or self._user_bytes[session.principal] + size > self.max_user_bytes
            )

        while session.events and over_own_bounds():
            self._drop(next(iter(session.events)))
        fits = not over_own_bounds() and size <= self.max_bytes
        while self._events and (
            len(self._events) >= self.max_events or self.bytes + size * fits > self.max_bytes
        ):
            self._drop(next(iter(self._events)))
        return fits

    def _drop(self, event_id: EventId) -> None:
        holder = self._events.pop(event_id)
        _stream, _message, size = holder.events.pop(event_id)
        holder.bytes -= size
        self._user_bytes[holder.principal] -= size
        if not self._user_bytes[holder.principal]:
            del self._user_bytes[holder.principal]
        self.bytes -= size

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the stream's events after `last_event_id`, oldest first; None (and nothing
        sent) if that event is not (or no longer) known, or is another session's."""
        session = _serving.get()
        if session is None or self._events.get(last_event_id) is not session:
            return None
        stream_id = session.events[last_event_id][0]
        after = False
        for event_id, (stream, message, _size) in list(session.events.items()):
            if after and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream_id

    def forget(self, session: SessionEvents) -> None:
        """Drop an ended session's events."""
        for event_id in list(session.events):
            self._drop(event_id)
