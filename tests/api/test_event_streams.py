"""Several event streams of one conversation open at once: each gets every change."""

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async

from chat import services
from config.asgi import django_asgi_app
from tests.asgi import http_scope


def stream_scope(conversation_id: int, token: str) -> dict:
    return http_scope(
        f"/api/v1/conversations/{conversation_id}/events",
        [(b"authorization", f"Bearer {token}".encode())],
    )


async def read_until(app: ApplicationCommunicator, text: bytes) -> bytes:
    body = b""
    while text not in body:
        message = await app.receive_output(10)
        body += message.get("body", b"")
    return body


# The streams read the database on threads of their own: what they read must be committed.
@pytest.mark.django_db(transaction=True)
async def test_each_of_several_open_streams_gets_what_changes(conversation, token, user):
    streams = []
    for _ in range(4):
        app = ApplicationCommunicator(django_asgi_app, stream_scope(conversation.pk, token))
        await app.send_input({"type": "http.request", "body": b""})
        start = await app.receive_output(10)
        assert start["status"] == 200
        await read_until(app, b"event: state_change")  # the snapshot: it is open
        streams.append(app)

    await database_sync_to_async(services.post_user_message)(
        user=user, conversation_id=conversation.pk, text="Still there?"
    )
    for app in streams:
        assert b"Still there?" in await read_until(app, b"Still there?")
    for app in streams:
        await app.send_input({"type": "http.disconnect"})
        await app.wait(10)
