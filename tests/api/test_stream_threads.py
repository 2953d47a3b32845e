"""An open event stream holds no thread (config.handlers.SyncStackASGIHandler.send_response):
its request's thread goes back to the kept threads once the view has returned, and the
streams' database visits share a few threads (api.events.VISIT_THREADS). Before, every open
stream kept a thread of its own, and its database connection, until it closed: a burst of
streams was a burst of threads."""

import asyncio
import threading

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async

from api.events import VISIT_THREADS
from chat import services
from config.asgi import django_asgi_app
from config.threads import sync_threads
from tests.asgi import http_scope

pytestmark = pytest.mark.django_db(transaction=True)


def stream_scope(conversation_id: int, token: str) -> dict:
    return http_scope(
        f"/api/v1/conversations/{conversation_id}/events",
        [(b"authorization", f"Bearer {token}".encode())],
    )


def threads_in_use() -> list[threading.Thread]:
    """The kept-thread pool's threads that are alive and not waiting in it for work."""
    idle = {t for pool in sync_threads.idle for t in pool._threads}
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith("parley-sync") and t not in idle and t.is_alive()
    ]


async def read_until(app: ApplicationCommunicator, text: bytes) -> bytes:
    body = b""
    while text not in body:
        message = await app.receive_output(10)
        body += message.get("body", b"")
    return body


async def test_open_event_streams_hold_no_thread_and_still_deliver(conversation, token, user):
    before = len(threads_in_use())
    streams = []
    for _ in range(4):
        app = ApplicationCommunicator(django_asgi_app, stream_scope(conversation.pk, token))
        await app.send_input({"type": "http.request", "body": b""})
        start = await app.receive_output(10)
        assert start["status"] == 200
        await read_until(app, b"event: state_change")  # its first visit to the database
        streams.append(app)
    await asyncio.sleep(0.2)

    assert len(threads_in_use()) <= before  # four open streams, no thread held for them
    assert len(VISIT_THREADS._threads) <= VISIT_THREADS._max_workers

    # And each still gets what changes.
    await database_sync_to_async(services.post_user_message)(
        user=user, conversation_id=conversation.pk, text="Still there?"
    )
    for app in streams:
        assert b"Still there?" in await read_until(app, b"Still there?")
    for app in streams:
        await app.send_input({"type": "http.disconnect"})
        await app.wait(10)
