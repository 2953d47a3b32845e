"""The conversation websocket of a shared conversation: a viewer's opens (reading is what a
viewer may do), a stranger's is refused, and a removed member's closes at once.

Committed for real: the consumer reads the database on a thread of its own."""

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from chat import services, sharing
from chat.live.consumers import CLOSE_NO_ACCESS, CLOSE_ROLE_CHANGED
from chat.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)

db = database_sync_to_async


async def connect_as(user, conversation_id):
    path = f"/ws/conversations/{conversation_id}/"
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return communicator, connected


@pytest.fixture
def people(django_user_model):
    return [
        django_user_model.objects.create_user(username=name)
        for name in ("owner", "bob", "vera", "stranger")
    ]


def share(owner, conversation, username, role):
    sharing.share_conversation(
        user=owner, conversation_id=conversation.pk, username=username, role=role
    )


async def test_a_viewers_socket_opens_and_a_strangers_is_refused(people):
    owner, _bob, vera, stranger = people
    conversation = await db(services.create_conversation)(owner=owner)
    await db(share)(owner, conversation, "vera", "viewer")
    communicator, connected = await connect_as(vera, conversation.pk)
    assert connected
    await communicator.disconnect()
    communicator, connected = await connect_as(stranger, conversation.pk)
    assert not connected


async def test_removing_a_member_closes_their_socket_at_once(people):
    owner, bob, _vera, _stranger = people
    conversation = await db(services.create_conversation)(owner=owner)
    await db(share)(owner, conversation, "bob", "participant")
    communicator, connected = await connect_as(bob, conversation.pk)
    assert connected
    await db(sharing.remove_member)(user=owner, conversation_id=conversation.pk, member_id=bob.pk)
    closed = await communicator.receive_output(timeout=2)
    assert closed == {"type": "websocket.close", "code": CLOSE_NO_ACCESS}


async def test_a_new_role_closes_the_socket_so_the_page_loads_again(people):
    owner, bob, _vera, _stranger = people
    conversation = await db(services.create_conversation)(owner=owner)
    await db(share)(owner, conversation, "bob", "participant")
    communicator, connected = await connect_as(bob, conversation.pk)
    assert connected
    await db(share)(owner, conversation, "bob", "viewer")
    closed = await communicator.receive_output(timeout=2)
    assert closed == {"type": "websocket.close", "code": CLOSE_ROLE_CHANGED}
