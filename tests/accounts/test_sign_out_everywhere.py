"""Sign out everywhere (Settings): every session of the account ends, in every browser, with
their open websockets and event streams, and every API token is revoked; nobody else's."""

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from accounts.views import SIGNED_OUT_EVERYWHERE
from api.tokens import create_token
from chat import services
from chat.live import sessions
from config.asgi import application, django_asgi_app
from tests.asgi import http_scope

pytestmark = pytest.mark.django_db

URL = reverse("accounts:sign_out_everywhere")
HOST = (b"host", b"127.0.0.1:8000")


def signed_in(user) -> Client:
    """A browser of its own, signed in as `user`."""
    browser = Client()
    browser.force_login(user)
    return browser


def api_status(token: str) -> int:
    """What an API call with `token` gets."""
    headers = {"Authorization": f"Bearer {token}"}
    return Client().get("/api/v1/conversations", headers=headers).status_code


def test_sign_out_everywhere_ends_every_session_and_revokes_every_token(user, other_user):
    here, elsewhere, theirs = signed_in(user), signed_in(user), signed_in(other_user)
    old_key = here.cookies["sessionid"].value
    _, token = create_token(user=user, name="laptop")
    _, their_token = create_token(user=other_user, name="theirs")
    assert api_status(token) == 200

    response = here.post(URL, follow=True)

    assert response.redirect_chain == [(reverse("login"), 302)]
    assert str(SIGNED_OUT_EVERYWHERE) in response.content.decode()  # the login page says so
    here.cookies["sessionid"] = old_key  # a copy of this browser's cookie
    for browser in (here, elsewhere):
        page = browser.get("/conversations/")
        assert page.status_code == 302 and page["Location"].startswith("/login/")
    assert api_status(token) == 401
    assert sessions.session_user_id(old_key) is None
    # Another user's session and token are untouched.
    assert theirs.get("/conversations/").status_code == 200
    assert api_status(their_token) == 200
    assert Session.objects.count() == 1


def test_sign_out_everywhere_is_a_post_with_a_csrf_token_by_a_signed_in_user(user):
    _, token = create_token(user=user, name="laptop")
    browser = signed_in(user)
    assert browser.get(URL).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(URL).status_code == 403  # what another site's form would get
    anonymous = Client().post(URL)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    assert browser.get("/conversations/").status_code == 200
    assert strict.get("/conversations/").status_code == 200
    assert api_status(token) == 200


def test_settings_say_what_a_password_change_does_and_offer_sign_out_everywhere(client, user):
    client.force_login(user)
    html = client.get(reverse("accounts:preferences")).content.decode()
    assert "Changing your password signs out your other sessions" in html
    assert "API tokens keep working until you revoke them or sign out everywhere" in html
    assert f'<form method="post" action="{URL}">' in html
    assert ">Sign out everywhere</button>" in html


def test_a_password_change_ends_the_other_sessions_but_not_this_one_or_the_tokens(
    django_user_model,
):
    """What the settings page says a password change does, through Django's own password
    change form (the admin's, for a staff user)."""
    user = django_user_model.objects.create_user("ada", password="pw-ada-123", is_staff=True)
    here, elsewhere = signed_in(user), signed_in(user)
    _, token = create_token(user=user, name="laptop")
    changed = here.post(
        "/admin/password_change/",
        {
            "old_password": "pw-ada-123",
            "new_password1": "a-new-pw-789",
            "new_password2": "a-new-pw-789",
        },
    )
    assert changed.status_code == 302
    assert here.get("/conversations/").status_code == 200
    assert elsewhere.get("/conversations/").status_code == 302
    assert api_status(token) == 200


# The socket and the stream read the database on threads of their own: committed for real.
@pytest.mark.django_db(transaction=True)
async def test_the_open_websockets_and_event_streams_close_at_once(user, other_user, monkeypatch):
    monkeypatch.setattr(sessions, "AUTH_RECHECK_SECONDS", 3600)  # the event, not the re-check
    db = database_sync_to_async
    here, elsewhere = await db(signed_in)(user), await db(signed_in)(user)
    conversation = await db(services.create_conversation)(owner=user)
    _, token = await db(create_token)(user=user, name="cli")
    socket = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[
            HOST,
            (b"origin", b"http://127.0.0.1:8000"),
            (b"cookie", f"sessionid={elsewhere.cookies['sessionid'].value}".encode()),
        ],
    )
    assert (await socket.connect())[0]
    stream = ApplicationCommunicator(
        django_asgi_app,
        http_scope(
            f"/api/v1/conversations/{conversation.pk}/events",
            [(b"authorization", f"Bearer {token}".encode())],
        ),
    )
    await stream.send_input({"type": "http.request", "body": b""})
    assert (await stream.receive_output(10))["status"] == 200
    body = b""
    while b"event: state_change" not in body:  # the snapshot: the stream is open
        body += (await stream.receive_output(10)).get("body", b"")

    assert (await db(here.post)(URL)).status_code == 302

    assert await socket.receive_output(timeout=1) == {"type": "websocket.close", "code": 4401}
    while b"event: revoked" not in body:
        body += (await stream.receive_output(1)).get("body", b"")
    await stream.send_input({"type": "http.disconnect"})
    await stream.wait(10)
