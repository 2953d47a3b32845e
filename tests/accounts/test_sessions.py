"""Sessions are Django's database sessions: one outlives the cache being cleared (a Redis
restart), and a logout ends it everywhere."""

import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache

from chat.live import sessions

pytestmark = pytest.mark.django_db


def sign_in(client) -> str:
    """Sign in as ada through the login form; the new session's key."""
    response = client.post("/login/", {"username": "ada", "password": "pw-ada-123"})
    assert response.status_code == 302
    return client.cookies["sessionid"].value


def test_a_session_is_kept_in_the_database(client, user):
    key = sign_in(client)
    assert Session.objects.filter(session_key=key).exists()


def test_a_session_survives_the_cache_being_cleared(client, user):
    key = sign_in(client)
    assert client.get("/conversations/").status_code == 200

    cache.clear()

    assert client.get("/conversations/").status_code == 200
    assert sessions.session_user_id(key) == user.pk  # what open sockets re-check


def test_logout_ends_the_session(client, user):
    key = sign_in(client)
    assert client.get("/conversations/").status_code == 200

    assert client.post("/logout/").status_code == 302

    client.cookies["sessionid"] = key  # the old cookie, kept by another tab or a copy
    response = client.get("/conversations/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert sessions.session_user_id(key) is None
