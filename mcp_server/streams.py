"""The events of this process's MCP response streams, kept for a client that reconnects with
Last-Event-ID (the SDK's EventStore): a call whose connection dropped while it waited gets its
answer on the resumed stream.

Kept in memory, like the sessions they belong to (the SDK keeps a session in the process that
opened it; deploy/nginx routes a session's requests there). At most MAX_EVENTS, the oldest
dropped first: a resumed stream needs only the events since the client's last one, and a
waiting call sends one every few seconds at most.
"""

import itertools
import uuid
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

MAX_EVENTS = 10_000


class RecentEvents(EventStore):
    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        # Event ids are unique to this process's life: one from before a restart finds nothing.
        self._prefix = uuid.uuid4().hex[:12]
        self._numbers = itertools.count(1)
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None]] = OrderedDict()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"{self._prefix}-{next(self._numbers)}"
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the stream's events after `last_event_id`, oldest first; None if that event is
        not (or no longer) known."""
        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream_id = found[0]
        after = False
        for event_id, (stream, message) in list(self._events.items()):
            if after and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream_id
