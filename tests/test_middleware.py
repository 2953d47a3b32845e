"""The middleware chain runs in the request's thread: a page costs a few trips between the
event loop and a thread, not one or two per middleware (config.middleware's
sync_chain_middleware), and every middleware still acts on it."""

import pytest
from asgiref import sync
from django.test import AsyncClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def trips_to_a_thread(monkeypatch) -> list[object]:
    """Every sync function the request stack sends to a thread, in order."""
    sent: list[object] = []
    original = sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        sent.append(self.func)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
    return sent


async def test_a_page_goes_to_a_thread_once_for_all_its_middleware(trips_to_a_thread):
    response = await AsyncClient().get("/login/")

    assert response.status_code == 200
    trips = [getattr(f, "__qualname__", repr(f)) for f in trips_to_a_thread]
    # One trip for the whole chain (its outermost middleware); no middleware sends its
    # process_request or process_response on its own (21 trips in all before, 7 now).
    assert trips.count("request_id_middleware.<locals>.middleware") == 1
    assert [t for t in trips if t.endswith(("process_request", "process_response"))] == []
    # Every middleware still ran: first to last.
    assert response["X-Request-ID"]
    assert "no-store" in response["Cache-Control"]
    assert "csrftoken" in response.cookies
    assert response["X-Frame-Options"] == "DENY"
    assert "Content-Security-Policy" in response
