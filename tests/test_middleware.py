"""The HTTP application of config.asgi (Django's own ASGI handler): every middleware acts on
a page, and async views answer."""

import pytest
from asgiref.testing import ApplicationCommunicator

from config.asgi import django_asgi_app
from tests.asgi import http_scope

# The view reads the database on the handler's sync thread, not the test's: it must see
# committed data.
pytestmark = pytest.mark.django_db(transaction=True)


async def get(path: str, headers: list | None = None) -> tuple[int, dict[str, str], bytes]:
    """GET `path` from the ASGI application as daphne calls it."""
    app = ApplicationCommunicator(django_asgi_app, http_scope(path, headers))
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
