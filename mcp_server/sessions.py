"""The MCP sessions open in this process, as Parley sees them from outside the SDK: whose each
is, and which stored events (mcp_server.streams) belong to it.

`SessionScope` wraps the SDK's session manager (inside its bearer authentication, so every
request has a principal). A request without a session id may open one: if the SDK answers
with a session id, that session is registered for the request's principal. A request naming a
session runs as that session's when the principal is the one that opened it; otherwise (the SDK
answers 404 then) as a throwaway one that stores nothing anyone reads.

A session ends, for Parley, when the client deletes it, when the SDK answers 404 for it, or
when it has had no request in flight for the idle timeout (the SDK ends it then too); its
events are dropped with it.
"""

import time
from dataclasses import dataclass, field

from mcp_server.streams import RecentEvents, SessionEvents, serving

SESSION_HEADER = b"mcp-session-id"


def header(scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


@dataclass(eq=False)
class OpenSession:
    events: SessionEvents
    in_flight: int = 0
    idle_since: float = field(default_factory=time.monotonic)


class SessionScope:
    """ASGI: each authenticated MCP request runs as its session's (streams.serving)."""

    def __init__(self, app, store: RecentEvents, *, idle_timeout: float) -> None:
        self.app = app
        self.store = store
        self.idle_timeout = idle_timeout
        self.sessions: dict[str, OpenSession] = {}

    async def __call__(self, scope, receive, send) -> None:
        principal = scope["user"].access_token.client_id
        session_id = header(scope, SESSION_HEADER)
        self._forget_idle()
        if session_id is None:
            session = OpenSession(SessionEvents(principal))
            send = self._registering(session, send)
        else:
            session = self.sessions.get(session_id)
            if session is None or session.events.principal != principal:
                session = OpenSession(SessionEvents(principal))
            else:
                send = self._watching(session_id, scope["method"], send)
        session.in_flight += 1
        try:
            with serving(session.events):
                await self.app(scope, receive, send)
        finally:
            session.in_flight -= 1
            session.idle_since = time.monotonic()

    def _registering(self, session: OpenSession, send):
        async def registered(message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = next(
                    (v.decode("latin-1") for k, v in message["headers"] if k == SESSION_HEADER),
                    None,
                )
                if opened is not None:
                    self.sessions[opened] = session
            await send(message)

        return registered

    def _watching(self, session_id: str, method: str, send):
        """Forget the session once the SDK says it is gone (404) or the client deleted it."""

        async def watched(message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                if status == 404 or (method == "DELETE" and status < 300):
                    self.forget(session_id)
            await send(message)

        return watched

    def forget(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.store.forget(session.events)

    def _forget_idle(self) -> None:
        """Forget the sessions idle past the timeout (the SDK has ended them)."""
        cutoff = time.monotonic() - self.idle_timeout
        idle = [
            session_id
            for session_id, session in self.sessions.items()
            if not session.in_flight and session.idle_since < cutoff
        ]
        for session_id in idle:
            self.forget(session_id)
