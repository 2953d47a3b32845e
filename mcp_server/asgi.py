"""The MCP endpoint as an ASGI application (config.asgi mounts it at /mcp/ in front of
Django): streamable HTTP through the SDK's session manager, behind Django's host check and the
SDK's bearer authentication over Parley's personal API tokens and the OAuth access tokens
issued for this endpoint (401 without a valid one, naming the protected resource metadata).

The session manager runs its sessions in a task group that must live as long as the process
(StreamableHTTPSessionManager.run(), meant for an ASGI lifespan). daphne sends no lifespan
events, so the first request to /mcp/ starts it, in a task of its own on the server's event
loop, outside any request (a request's task ends with it; the sessions must not), and every
request waits until it runs. A process that never serves MCP never starts it. It stops with
the loop, as the process exits; the calls waiting then are lost to their clients, and their
questions stay answerable (mcp_server.services.ask).
"""

import asyncio
import contextvars
import functools
import hashlib
import hmac

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse

from mcp_server.auth import McpTokens
from mcp_server.oauth import MCP_PATH, base_url_of, mcp_resource
from mcp_server.server import make_server
from mcp_server.sessions import SESSION_HEADER, SessionScope
from mcp_server.streams import RecentEvents

PATH = "/mcp"


class McpEndpoint:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: asyncio.Future | None = None
        self._task: asyncio.Task | None = None
        self._sessions = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if not host_allowed(scope):
            response = JSONResponse(
                {"error": "invalid_request", "error_description": "Bad host"}, 400
            )
            await response(scope, receive, send)
            return
        await self._start()
        process = _process_name(scope)
        app = _authenticated(self._sessions, base_url_of(_request_url(scope)))
        await app(_session_of_this_process(scope, process), receive, _naming(send, process))

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the first request on this loop (tests run several loops)
            self._loop = loop
            events = RecentEvents()
            manager = StreamableHTTPSessionManager(
                app=make_server(),
                event_store=events,
                max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
                session_idle_timeout=settings.MCP_SESSION_IDLE_SECONDS,
            )
            self._sessions = SessionScope(
                manager.handle_request,
                events,
                idle_timeout=settings.MCP_SESSION_IDLE_SECONDS,
                per_user=settings.MCP_SESSIONS_PER_USER,
            )
            self._running = loop.create_future()
            self._task = loop.create_task(
                _run(manager, self._running), context=contextvars.Context()
            )
        await asyncio.shield(self._running)


def metadata_url(base: str) -> str:
    """Where the protected resource metadata of /mcp/ at `base` is (RFC 9728's path form)."""
    return f"{base}/.well-known/oauth-protected-resource{MCP_PATH}"


def _authenticated(sessions, base: str):
    """`sessions` behind bearer authentication for /mcp/ at `base`: a 401 names the resource
    metadata, and OAuth tokens count only if issued for this resource."""
    return AuthenticationMiddleware(
        AuthContextMiddleware(
            RequireAuthMiddleware(sessions, [], resource_metadata_url=metadata_url(base))
        ),
        backend=BearerAuthBackend(McpTokens(mcp_resource(base))),
    )


def _request_url(scope) -> str:
    """The request's origin as the client addressed it, as Django's request sees it (the
    proxy's X-Forwarded-Proto and X-Forwarded-Host when settings trust them)."""
    headers = {k: v.decode("latin-1") for k, v in scope["headers"]}
    scheme = scope.get("scheme", "http")
    if settings.SECURE_PROXY_SSL_HEADER and headers.get(b"x-forwarded-proto") == "https":
        scheme = "https"
    host = headers.get(b"host", "")
    if settings.USE_X_FORWARDED_HOST and headers.get(b"x-forwarded-host"):
        host = headers[b"x-forwarded-host"].split(",")[0].strip()
    return f"{scheme}://{host}/"


async def _run(manager: StreamableHTTPSessionManager, running: asyncio.Future) -> None:
    """Run the session manager until the loop ends."""
    try:
        async with manager.run():
            running.set_result(None)
            await asyncio.get_running_loop().create_future()
    except BaseException as error:
        if not running.done():
            running.set_exception(error)
        raise


# An MCP session lives in the process that opened it (the SDK keeps it in memory). Its id, as
# clients see it, starts with that process's route ("<route>/…"), so that a proxy in front of
# several processes sends each session's requests to its own (deploy/nginx maps each route to
# its process); this process takes its own route off again before the SDK reads it.


@functools.cache
def route(address: str) -> str:
    """The route of the process serving at `address` ("host:port"): opaque (a keyed hash,
    which shows nothing of the deployment), stable across restarts, and the same that
    `manage.py mcp_route` prints for nginx's configuration."""
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"parley-mcp-route:{address}".encode(), hashlib.sha256).hexdigest()[:16]


def _process_name(scope) -> bytes:
    host, port = scope.get("server") or ("", "")
    return f"{route(f'{host}:{port}')}/".encode()


def _session_of_this_process(scope, process: bytes):
    headers = [
        (name, value.removeprefix(process) if name == SESSION_HEADER else value)
        for name, value in scope["headers"]
    ]
    return {**scope, "headers": headers}


def _naming(send, process: bytes):
    async def named(message) -> None:
        if message["type"] == "http.response.start":
            message = {
                **message,
                "headers": [
                    (name, process + value if name.lower() == SESSION_HEADER else value)
                    for name, value in message.get("headers", [])
                ],
            }
        await send(message)

    return named


def host_allowed(scope) -> bool:
    """Django's ALLOWED_HOSTS check (HttpRequest.get_host), which the requests to /mcp/ do
    not pass through Django for."""
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


def mount(endpoint, django_app):
    """HTTP requests to /mcp and under /mcp/ go to `endpoint`, the rest to Django."""

    async def route(scope, receive, send):
        path = scope.get("path", "")
        if path == PATH or path.startswith(PATH + "/"):
            return await endpoint(scope, receive, send)
        return await django_app(scope, receive, send)

    return route
