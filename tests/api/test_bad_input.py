"""Every bad input gets a clean, documented error, never a 500."""

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.sites import site
from django.core.signals import request_finished
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from api.models import ApiToken
from api.tokens import create_token
from chat import services
from chat.models import Conversation

# Also run on PostgreSQL (make test): out-of-range numbers fail differently on each backend.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# Bidi overrides, zero-width characters, a Unicode tag character, NUL and a lone surrogate.
HIDDEN = "\u202e\u200b\U000e0041\x00\ud800"


@pytest.mark.parametrize("last_id", ["²", "1" * 5000, "-1", "12abc"])
def test_last_event_id_that_is_not_a_cursor_is_422_not_500(api, conversation, last_id):
    response = api.get(
        f"/conversations/{conversation.pk}/events", headers={"Last-Event-ID": last_id}
    )
    assert response.status_code == 422, response.content[:300]
    assert "Last-Event-ID" in response.json()["message"]


def test_an_after_query_of_5000_digits_is_422_not_500(api, conversation):
    response = api.get(f"/conversations/{conversation.pk}/events", after="9" * 5000)
    assert response.status_code == 422
    assert response.json()["message"]


def test_an_api_body_over_256_kib_is_a_json_413(api, conversation):
    body = {"content": "x" * (300 * 1024)}
    for path in [f"/conversations/{conversation.pk}/messages", "/conversations"]:
        response = api.post(path, body)
        assert response.status_code == 413, response.content[:300]
        assert response["Content-Type"].startswith("application/json")
        assert "256 KiB" in response.json()["message"]


def test_token_names_with_nul_and_lone_surrogates_are_cleaned_and_stored(client, user):
    record, _ = create_token(user=user, name=f"lap{HIDDEN}top")
    assert record.name == "laptop"
    client.force_login(user)
    # A form post cannot carry a lone surrogate (it is not UTF-8); JSON can ("\\ud800").
    page = client.post("/settings/tokens/", {"name": f"phone{HIDDEN[:-1]}"})
    assert page.status_code == 201
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["laptop", "phone"]


def test_hidden_characters_are_cleaned_from_titles_and_messages_in_api_and_admin(
    api, user, django_user_model
):
    visible = HIDDEN[:-1]
    created = api.post("/conversations", {"title": f"Pay{visible}roll"}).json()
    assert created["title"] == "Payroll"
    path = f"/conversations/{created['id']}/messages"
    # A lone surrogate is not text: the body is refused as a whole, with the JSON error.
    for body in [{"title": "\ud800"}, {"content": "a\ud800"}]:
        refused = api.post(path if "content" in body else "/conversations", body)
        assert refused.status_code == 422
        assert refused.json()["message"]
    sent = api.post(path, {"content": f"hi{visible} there"})
    assert sent.status_code == 200
    conversation = Conversation.objects.get(pk=created["id"])
    assert conversation.title == "Payroll"
    assert conversation.messages.get(role="user").blocks[0]["text"] == "hi there"
    renamed = services.rename_conversation(
        user=user, conversation_id=conversation.pk, title="\u2066evil\u2069 title"
    )
    assert renamed.title == "evil title"

    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    staff = Client()
    staff.force_login(admin)
    listing = staff.get("/admin/chat/conversation/").content.decode()
    detail = staff.get(f"/admin/chat/conversation/{conversation.pk}/change/").content.decode()
    for page in (listing, detail):
        assert "evil title" in page
        for char in "\u202e\u200b\U000e0041\u2066\u2069":
            assert char not in page
    assert site.is_registered(Conversation)


def test_no_store_on_the_token_page_conversation_pages_and_api(client, user, conversation, api):
    client.force_login(user)
    responses = [
        client.get("/settings/tokens/"),
        client.post("/settings/tokens/", {"name": "new"}),
        client.get("/"),
        client.get(f"/c/{conversation.pk}/"),
        api.get("/conversations"),
        api.get(f"/conversations/{conversation.pk}"),
        api.get("/conversations/999999"),
    ]
    for response in responses:
        assert "no-store" in response["Cache-Control"], (response, response["Cache-Control"])


def test_a_wrong_token_is_401_even_on_post_and_a_session_post_needs_csrf(user):
    wrong = {"Authorization": "Bearer parley_wrong"}
    anonymous = Client(enforce_csrf_checks=True)
    response = anonymous.post("/api/v1/conversations", {}, "application/json", headers=wrong)
    assert response.status_code == 401
    assert "CSRF" not in response.json()["message"]

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    refused = browser.post("/api/v1/conversations", {}, "application/json")
    assert refused.status_code == 403
    assert "X-CSRFToken" in refused.json()["message"]
    # A session with a wrong token beside it is not the session: 401.
    mixed = browser.post("/api/v1/conversations", {}, "application/json", headers=wrong)
    assert mixed.status_code == 401


@examples(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    last_id=st.one_of(
        st.text(st.characters(max_codepoint=0xFF, exclude_categories=["Cs"]), max_size=40),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
    )
)
def test_any_last_event_id_is_a_stream_or_a_422(api, conversation, last_id):
    response = api.get(
        f"/conversations/{conversation.pk}/events", headers={"Last-Event-ID": last_id}
    )
    assert response.status_code in (200, 422), (last_id, response.status_code)
    if response.status_code == 422:
        assert response.json()["message"]
    close_unread(response)  # gives the stream's slot back, as the server does


def close_unread(response) -> None:
    """Close a response the test did not read to its end, as the test client closes one it
    did: without request_finished closing the database connection of the test's transaction."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def test_a_wait_that_outlives_its_token_answers_401(api, user, conversation, monkeypatch):
    from api import replies as endpoints

    async def revoke_while_waiting(conversation_id, seconds):
        await sync_to_async(ApiToken.objects.all().delete)()

    monkeypatch.setattr(endpoints, "wait_until_settled", revoke_while_waiting)
    response = api.post(f"/conversations/{conversation.pk}/messages", {"content": "hi", "wait": 5})
    assert response.status_code == 401
