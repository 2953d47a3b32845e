"""The HTTP application of config.asgi (Django's own ASGI handler): every middleware acts on
a page, and async views answer."""

import pytest
from asgiref.testing import ApplicationCommunicator

from config.asgi import application, django_asgi_app
from tests.asgi import http_scope

# The view reads the database on the handler's sync thread, not the test's: it must see
# committed data.
pytestmark = pytest.mark.django_db(transaction=True)


async def get(
    path: str, headers: list | None = None, *, to=django_asgi_app
) -> tuple[int, dict[str, str], bytes]:
    """GET `path` from the ASGI application `to` as daphne calls it."""
    app = ApplicationCommunicator(to, http_scope(path, headers))
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(5)
    body = b""
    while True:
        message = await app.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await app.wait(5)
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, body


async def test_every_middleware_acts_on_a_page():
    status, headers, body = await get("/login/")

    assert status == 200
    assert b'name="username"' in body
    assert headers["x-request-id"]
    assert "no-store" in headers["cache-control"]
    assert "csrftoken=" in headers["set-cookie"]
    assert headers["x-frame-options"] == "DENY"
    assert "content-security-policy" in headers


async def test_an_async_view_still_answers():
    status, headers, body = await get("/healthz")

    assert status == 200, body
    assert headers["x-request-id"]


async def test_static_files_are_served_with_their_own_caching():
    status, headers, body = await get("/static/parley.css")

    assert status == 200
    assert b"{" in body
    assert "no-store" not in headers.get("cache-control", "")
    assert "content-security-policy" in headers


async def test_the_mcp_endpoint_gets_the_request_id_and_security_headers_of_a_page():
    """/mcp/ is served beside Django, not through its middleware (config.asgi)."""
    status, headers, _body = await get("/mcp/", [(b"x-request-id", b"trace-42")], to=application)

    assert status == 401  # no token
    assert headers["x-request-id"] == "trace-42"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin"
    assert headers["cache-control"] == "no-store"
    assert headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
    assert "strict-transport-security" not in headers
    _status, minted, _body = await get("/mcp/", [(b"x-request-id", b"bad id\n")], to=application)
    assert len(minted["x-request-id"]) == 32


async def test_the_mcp_endpoint_redirects_plain_http_to_https_as_pages_do(settings):
    """A bearer token must not travel in the clear: with SECURE_SSL_REDIRECT, plain http gets
    a 308 (the client repeats its POST at the https address), and https gets HSTS."""
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    status, headers, _body = await get("/mcp/?x=1", to=application)
    assert (status, headers["location"]) == (308, "https://127.0.0.1/mcp/?x=1")
    assert headers["x-request-id"]
    status, headers, _body = await get("/mcp/", [(b"x-forwarded-proto", b"https")], to=application)
    assert status == 401
    assert headers["strict-transport-security"] == "max-age=3600"
