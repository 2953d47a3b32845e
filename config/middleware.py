import logging
import re
import uuid

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import sync_and_async_middleware
from django.utils.deprecation import MiddlewareMixin

from chat import views
from config.logging import current_request_id
from core.errors import REDIS_UNAVAILABLE, ServiceUnavailable

logger = logging.getLogger("parley.redis")

REQUEST_ID_HEADER = "X-Request-ID"
# What a proxy's id looks like (a UUID, nginx's $request_id, a trace id); anything else (too
# long, spaces, control characters that could forge log lines) is replaced.
WELL_FORMED_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=+/@-]{0,127}", re.ASCII)


class LoginRequiredExceptApiMiddleware(LoginRequiredMiddleware):
    """Every page needs a signed-in user; the JSON API authenticates itself (a 401, not a
    redirect to the login form)."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class ServiceUnavailableMiddleware(MiddlewareMixin):
    """A view that needed Redis while Redis could not be reached (core.errors
    .REDIS_UNAVAILABLE: logging in and sending a message count against the limits, an event
    stream subscribes to live events) answers 503 with Retry-After and a message to try again
    in a moment, instead of a 500: JSON `{"message"}` in the API, as its other errors; the
    message alone to htmx, which static/parley.js shows where the person acted; else the
    error page. The one place this is decided, for every view."""

    def process_exception(self, request, exception):
        if not isinstance(exception, REDIS_UNAVAILABLE):
            return None
        logger.warning(
            "Redis is unavailable (%s %s): %s: %s",
            request.method,
            request.path,
            type(exception).__name__,
            exception,
        )
        if not request.path_info.startswith("/api/") and not request.htmx:
            return views.service_unavailable(request)
        error = ServiceUnavailable()
        if request.path_info.startswith("/api/"):
            response = JsonResponse({"message": str(error.message)}, status=error.status)
        else:
            response = HttpResponse(
                error.message, content_type="text/plain; charset=utf-8", status=error.status
            )
        response["Retry-After"] = str(error.retry_after)
        return response


@sync_and_async_middleware
def request_id_middleware(get_response):
    """Give each request an id: the proxy's `X-Request-ID` when well-formed, else a new one.

    The id is `request.request_id`, the response's `X-Request-ID`, and the `request_id` of
    every log record emitted while the request is handled (config.logging). Goes first in
    MIDDLEWARE, so that redirects and refusals by other middleware carry it too.
    """

    def tagged(request, response):
        response[REQUEST_ID_HEADER] = request.request_id
        return response

    if iscoroutinefunction(get_response):

        async def middleware(request):
            token = current_request_id.set(assign_request_id(request))
            try:
                response = await get_response(request)
            finally:
                current_request_id.reset(token)
            return tagged(request, response)

    else:

        def middleware(request):
            token = current_request_id.set(assign_request_id(request))
            try:
                response = get_response(request)
            finally:
                current_request_id.reset(token)
            return tagged(request, response)

    return middleware


def assign_request_id(request) -> str:
    proposed = request.headers.get(REQUEST_ID_HEADER, "")
    if WELL_FORMED_REQUEST_ID.fullmatch(proposed):
        request.request_id = proposed
    else:
        request.request_id = uuid.uuid4().hex
    return request.request_id


@sync_and_async_middleware
def no_store_middleware(get_response):
    """Pages, API responses and event streams carry transcripts, tokens and questions:
    `Cache-Control: no-store` on every response without caching headers of its own (static
    files come from WhiteNoise with theirs, and keep their long cache)."""
    if iscoroutinefunction(get_response):

        async def middleware(request):
            return no_store(await get_response(request))

    else:

        def middleware(request):
            return no_store(get_response(request))

    return middleware


def no_store(response):
    """`no-store` unless the view chose its own caching (every Parley view that does says
    no-store)."""
    if not response.has_header("Cache-Control"):
        add_never_cache_headers(response)
    return response


class AsgiSecurity:
    """What Django's middleware gives every page, for an ASGI app mounted beside Django (the
    MCP endpoint): the request id (as request_id_middleware), the redirect to https
    (SECURE_SSL_REDIRECT; 308, which keeps a POST a POST) and SecurityMiddleware's and
    XFrameOptionsMiddleware's headers, with `no-store` and a Content-Security-Policy that allows
    nothing (nothing there is a page). `host_allowed(scope)` is the app's own ALLOWED_HOSTS
    check: a request it refuses is not redirected, so the app answers it."""

    def __init__(self, app, *, host_allowed) -> None:
        self.app = app
        self.host_allowed = host_allowed

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        proposed = _header(scope, b"x-request-id")
        request_id = proposed if WELL_FORMED_REQUEST_ID.fullmatch(proposed) else uuid.uuid4().hex
        secure = _is_secure(scope)
        headers = _security_headers(request_id, secure=secure)
        token = current_request_id.set(request_id)
        try:
            if settings.SECURE_SSL_REDIRECT and not secure and self.host_allowed(scope):
                await _redirect_to_https(scope, send, headers)
                return
            await self.app(scope, receive, _adding(send, headers))
        finally:
            current_request_id.reset(token)


def _header(scope, name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), "")


def _is_secure(scope) -> bool:
    """As HttpRequest.is_secure(): the connection's scheme, or SECURE_PROXY_SSL_HEADER."""
    if scope.get("scheme") == "https":
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not proxy:
        return False
    name, expected = proxy
    header = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
    return _header(scope, header).split(",", 1)[0].strip() == expected


def _security_headers(request_id: str, *, secure: bool) -> list[tuple[bytes, bytes]]:
    headers = {
        REQUEST_ID_HEADER: request_id,
        "X-Content-Type-Options": "nosniff" if settings.SECURE_CONTENT_TYPE_NOSNIFF else "",
        "Referrer-Policy": settings.SECURE_REFERRER_POLICY or "",
        "Cross-Origin-Opener-Policy": settings.SECURE_CROSS_ORIGIN_OPENER_POLICY or "",
        "X-Frame-Options": settings.X_FRAME_OPTIONS,
        "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    }
    if secure and settings.SECURE_HSTS_SECONDS:
        hsts = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            hsts += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            hsts += "; preload"
        headers["Strict-Transport-Security"] = hsts
    return [(k.lower().encode(), v.encode("latin-1")) for k, v in headers.items() if v]


def _adding(send, headers: list[tuple[bytes, bytes]]):
    """`send`, with `headers` on the response (a header the app set itself stays), and
    `no-store` unless the app chose its own caching."""

    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            own = {name.lower() for name, _value in message.get("headers", [])}
            extra = [(k, v) for k, v in headers if k not in own]
            if b"cache-control" not in own:
                extra.append((b"cache-control", b"no-store"))
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def _redirect_to_https(scope, send, headers) -> None:
    host = settings.SECURE_SSL_HOST or _header(scope, b"host")
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    location = b"https://" + host.encode("latin-1") + path + (b"?" + query if query else b"")
    await send(
        {
            "type": "http.response.start",
            "status": 308,
            "headers": [*headers, (b"location", location), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
