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

A user holds at most `per_user` sessions (those open and those being opened): past it, a
request that would open another is refused with 429 and says why, so one user cannot take the
sessions the SDK allows a process (10,000) from everyone else. Requests of the 2026-07-28
protocol open no session and are never refused for it.
"""

import time
from collections import Counter
from dataclasses import dataclass, field

from django.utils.translation import gettext as _
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse

from mcp_server.streams import RecentEvents, SessionEvents, serving

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
# How often, at most, the sessions are looked through for idle ones.
SWEEP_SECONDS = 1.0


def header(scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


@dataclass(eq=False)
class OpenSession:
    events: SessionEvents
    registered: bool = False
    in_flight: int = 0
    idle_since: float = field(default_factory=time.monotonic)


class SessionScope:
    """ASGI: each authenticated MCP request runs as its session's (streams.serving)."""

    def __init__(self, app, store: RecentEvents, *, idle_timeout: float, per_user: int) -> None:
        self.app = app
        self.store = store
        self.idle_timeout = idle_timeout
        self.per_user = per_user
        self.sessions: dict[str, OpenSession] = {}
        self.held: Counter[str] = Counter()  # sessions open or being opened, per principal
        self._swept_at = 0.0

    async def __call__(self, scope, receive, send) -> None:
        principal = scope["user"].access_token.client_id
        session_id = header(scope, SESSION_HEADER)
        self._forget_idle()
        if session_id is None and _may_open_a_session(scope):
            if self.held[principal] >= self.per_user:
                await self._refuse(scope, receive, send)
                return
            self.held[principal] += 1
            session = OpenSession(SessionEvents(principal))
            try:
                await self._serve(session, scope, receive, self._registering(session, send))
            finally:
                if not session.registered:
                    self._release(principal)
            return
        if session_id is None:
            session = OpenSession(SessionEvents(principal))
        else:
            session = self.sessions.get(session_id)
            if session is None or session.events.principal != principal:
                session = OpenSession(SessionEvents(principal))
            else:
                send = self._watching(session_id, scope["method"], send)
        await self._serve(session, scope, receive, send)

    async def _serve(self, session: OpenSession, scope, receive, send) -> None:
        session.in_flight += 1
        try:
            with serving(session.events):
                await self.app(scope, receive, send)
        finally:
            session.in_flight -= 1
            session.idle_since = time.monotonic()

    async def _refuse(self, scope, receive, send) -> None:
        message = _(
            "Too many open MCP sessions: a user may have %(count)s. Close one (DELETE with its "
            "Mcp-Session-Id) or wait: a session with nothing in flight ends after %(minutes)s "
            "minutes."
        ) % {"count": self.per_user, "minutes": max(1, round(self.idle_timeout / 60))}
        body = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": INVALID_REQUEST, "message": message},
        }
        response = JSONResponse(body, 429, headers={"Retry-After": str(int(self.idle_timeout))})
        await response(scope, receive, send)

    def _registering(self, session: OpenSession, send):
        async def registered(message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = next(
                    (v.decode("latin-1") for k, v in message["headers"] if k == SESSION_HEADER),
                    None,
                )
                if opened is not None:
                    self.sessions[opened] = session
                    session.registered = True
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
            self._release(session.events.principal)

    def _release(self, principal: str) -> None:
        self.held[principal] -= 1
        if self.held[principal] <= 0:
            del self.held[principal]

    def _forget_idle(self) -> None:
        """Forget the sessions idle past the timeout (the SDK has ended them)."""
        now = time.monotonic()
        if now - self._swept_at < SWEEP_SECONDS:
            return
        self._swept_at = now
        cutoff = now - self.idle_timeout
        idle = [
            session_id
            for session_id, session in self.sessions.items()
            if not session.in_flight and session.idle_since < cutoff
        ]
        for session_id in idle:
            self.forget(session_id)


def _may_open_a_session(scope) -> bool:
    """Whether the SDK may open a session for this request without a session id: a POST of
    the protocol versions with a handshake (the SDK routes the others, 2026-07-28 on,
    sessionless)."""
    version = header(scope, VERSION_HEADER)
    return scope["method"] == "POST" and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)
