"""The websocket Origin check (config/origins.py): exactly the page's own scheme, host and port,
or one of CSRF_TRUSTED_ORIGINS."""

import pytest

from config.origins import origin_allowed


def scope(origin: str, host: str = "chat.example.com", scheme: str = "ws", **headers) -> dict:
    raw = [(b"origin", origin.encode()), (b"host", host.encode())]
    raw += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    return {"type": "websocket", "scheme": scheme, "headers": raw}


@pytest.fixture(autouse=True)
def hosts(settings):
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example.com:8443"]


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://chat.example.com", True),
        ("http://chat.example.com:80", True),
        ("https://chat.example.com", False),
        ("http://chat.example.com:8080", False),
        ("http://evil.example.com", False),
        ("https://app.example.com:8443", True),
        ("https://app.example.com", False),
        ("null", False),
        ("", False),
    ],
)
def test_plain_http_origins(origin, allowed):
    assert origin_allowed(scope(origin)) is allowed


def test_behind_a_tls_proxy_the_forwarded_scheme_counts_only_when_trusted(settings):
    forwarded = scope("https://chat.example.com", x_forwarded_proto="https")
    assert not origin_allowed(forwarded)
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert origin_allowed(forwarded)
    assert not origin_allowed(scope("http://chat.example.com", x_forwarded_proto="https"))
    assert origin_allowed(scope("https://chat.example.com", scheme="wss"))


def test_a_host_that_is_not_served_has_no_own_origin():
    assert not origin_allowed(scope("http://other.example.com", host="other.example.com"))
