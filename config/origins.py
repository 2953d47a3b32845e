"""The websocket Origin check: exact scheme, host and port.

A browser sends `Origin` with every websocket handshake; cookies go along whoever opened the
socket, so the origin is what tells our own pages from another site's. Allowed are the
request's own origin (the scheme the client used, and the `Host` it asked for, which must be
one of ALLOWED_HOSTS) and the CSRF_TRUSTED_ORIGINS — the same origins Django's CSRF check
accepts for a POST.
"""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise(origin: str) -> str | None:
    """`scheme://host:port` with the port always written, or None if it is not an origin."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def _headers(scope) -> dict[bytes, str]:
    return {name: value.decode("latin-1") for name, value in scope.get("headers", [])}


def own_origin(scope) -> str | None:
    """The origin the client connected to, if its host is one we serve."""
    headers = _headers(scope)
    host = headers.get(b"host", "")
    if settings.USE_X_FORWARDED_HOST and b"x-forwarded-host" in headers:
        host = headers[b"x-forwarded-host"].split(",")[-1].strip()
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    secure = scope.get("scheme") in ("wss", "https")
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header and b"x-forwarded-proto" in headers:
        # As Django's request.is_secure(): the trusted proxy's header decides when present.
        forwarded = headers[b"x-forwarded-proto"].split(",")[0].strip().lower()
        secure = forwarded == "https"
    return normalise(f"{'https' if secure else 'http'}://{host}")


def origin_allowed(scope) -> bool:
    origin = normalise(_headers(scope).get(b"origin", ""))
    if origin is None:
        return False
    trusted = {normalise(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    return origin == own_origin(scope) or origin in trusted


class ExactOriginValidator:
    """ASGI middleware for websockets: refuse the handshake (HTTP 403) unless the Origin is
    exactly an allowed one."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
