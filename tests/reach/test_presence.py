"""Whether a user has a Parley page open (core.presence), as Web Push reads it: every
signed-in page's live channel marks its user present while it is open."""

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.core.cache import cache

from core import presence
from questions.routing import websocket_urlpatterns


@pytest.mark.django_db(transaction=True)
async def test_an_open_page_marks_its_user_present_and_the_mark_lapses(user, other_user):
    cache.clear()
    assert presence.open_pages_of([user.pk, other_user.pk]) == set()
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/me/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    await communicator.receive_from(timeout=20)  # the first push: the socket is set up
    assert presence.open_pages_of([user.pk, other_user.pk]) == {user.pk}
    await communicator.disconnect()
    # The mark outlives the socket (another process may hold another page) until it lapses.
    assert user.pk in presence.open_pages_of([user.pk])
    cache.delete(f"parley:presence:{user.pk}")  # as PRESENCE_SECONDS later
    assert user.pk not in presence.open_pages_of([user.pk])
