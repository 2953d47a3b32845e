"""A request goes to a thread once for its whole middleware chain and its view
(config.handlers.SyncStackASGIHandler, the HTTP application of config.asgi), every middleware
still acts on it, and async views still answer."""

import pytest
from asgiref import sync
from asgiref.testing import ApplicationCommunicator

from config.asgi import django_asgi_app
from tests.asgi import http_scope

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def trips_to_a_thread(monkeypatch) -> list[str]:
    """The name of every sync function the request stack sends to a thread, in order."""
    sent: list[str] = []
    original = sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        sent.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
    return sent


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


async def test_a_page_goes_to_a_thread_once_for_its_middleware_and_view(trips_to_a_thread):
    status, headers, body = await get("/login/")

    assert status == 200
    assert b'name="username"' in body
    # One trip for the chain and the view together (Django's own handler made 7, or 21 with
    # its middleware in async mode); Django's request_started receivers and the response's
    # close make the others. No middleware hook or view goes to a thread on its own.
    assert trips_to_a_thread.count("BaseHandler.get_response") == 1
    assert [t for t in trips_to_a_thread if "process_" in t or "View" in t] == []
    assert len(trips_to_a_thread) <= 3, trips_to_a_thread
    # Every middleware still ran.
    assert headers["x-request-id"]
    assert "no-store" in headers["cache-control"]
    assert "csrftoken=" in headers["set-cookie"]
    assert headers["x-frame-options"] == "DENY"
    assert "content-security-policy" in headers


async def test_an_async_view_still_answers():
    status, headers, body = await get("/healthz")

    assert status == 200, body
    assert headers["x-request-id"]
