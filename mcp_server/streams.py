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
"""

import contextvars
import itertools
import uuid
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

MAX_EVENTS = 10_000


@dataclass(eq=False)
class SessionEvents:
    """One MCP session's stored events, oldest first, and whose session it is (the SDK's
    principal: AccessToken.client_id)."""

    principal: str
    events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None]] = field(
        default_factory=OrderedDict
    )


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
    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        # Event ids are unique to this process's life: one from before a restart finds nothing.
        self._prefix = uuid.uuid4().hex[:12]
        self._numbers = itertools.count(1)
        # Every stored event, oldest first, with the session that holds it.
        self._events: OrderedDict[EventId, SessionEvents] = OrderedDict()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        session = _serving.get() or SessionEvents(principal="")
        event_id = f"{self._prefix}-{next(self._numbers)}"
        session.events[event_id] = (stream_id, message)
        self._events[event_id] = session
        while len(self._events) > self.max_events:
            oldest, holder = self._events.popitem(last=False)
            holder.events.pop(oldest, None)
        return event_id

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
        for event_id, (stream, message) in list(session.events.items()):
            if after and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream_id

    def forget(self, session: SessionEvents) -> None:
        """Drop an ended session's events."""
        for event_id in session.events:
            self._events.pop(event_id, None)
        session.events.clear()
