"""docs/developers/decisions/0004-mcp-events-per-session.md: what mcp_server.streams relies on
in the MCP SDK. Each check names the part that changed."""

import inspect

from mcp.server.streamable_http import EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


def test_a_session_is_started_from_the_request_that_opens_it():
    source = inspect.getsource(StreamableHTTPSessionManager._serve_opening_request)
    assert "await self._task_group.start(run_server)" in source, (
        "the SDK no longer starts a session's server task from its opening request: "
        "its events would be stored for no session"
    )
    assert "http_transport.connect()" in source


def test_the_message_router_is_started_by_connect_and_stores_the_events():
    source = inspect.getsource(StreamableHTTPServerTransport.connect)
    assert "tg.start_soon(message_router)" in source, (
        "the transport no longer starts its message router in connect()"
    )
    assert "self._event_store.store_event(" in source, (
        "the events are no longer stored by the message router"
    )


def test_the_event_store_names_no_session():
    """If the SDK's store starts naming the session, use that instead of the variable."""
    assert list(inspect.signature(EventStore.store_event).parameters) == [
        "self",
        "stream_id",
        "message",
    ]
    assert list(inspect.signature(EventStore.replay_events_after).parameters) == [
        "self",
        "last_event_id",
        "send_callback",
    ]
