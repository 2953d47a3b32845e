"""The authentication backend (accounts.backends): Django's ModelBackend, with the user's read
compiled."""

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, base_user
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.backends import CompiledModelBackend

pytestmark = pytest.mark.django_db

DJANGOS = "django.contrib.auth.backends.ModelBackend"


def page_status(client, backend: str, user) -> int:
    """The conversation list's status for a session signed in through `backend`."""
    session = SessionStore()
    session.update(
        {
            SESSION_KEY: str(user.pk),
            BACKEND_SESSION_KEY: backend,
            HASH_SESSION_KEY: user.get_session_auth_hash(),
        }
    )
    session.create()
    client.cookies["sessionid"] = session.session_key
    return client.get("/").status_code


@pytest.mark.parametrize("backend", ["accounts.backends.CompiledModelBackend", DJANGOS])
def test_a_signed_in_session_opens_the_pages_whichever_backend_signed_it_in(client, user, backend):
    """Sessions signed in before this backend name Django's: still signed in after it."""
    assert page_status(client, backend, user) == 200


def test_signing_in_names_this_backend_and_reads_the_user_in_one_query(client, user):
    assert client.post("/login/", {"username": "ada", "password": "pw-ada-123"}).status_code == 302
    assert client.session[BACKEND_SESSION_KEY] == "accounts.backends.CompiledModelBackend"
    backend = CompiledModelBackend()
    with CaptureQueriesContext(connection) as queries:
        found = backend.get_user(user.pk)
    assert found == user and len(queries) == 1
    assert backend.get_user(str(user.pk)) == user  # as the session stores it


def test_no_user_for_an_unknown_inactive_or_malformed_id(user, django_user_model):
    backend = CompiledModelBackend()
    assert backend.get_user(user.pk + 1000) is None
    assert backend.get_user("not-an-id") is None
    django_user_model.objects.filter(pk=user.pk).update(is_active=False)
    assert backend.get_user(user.pk) is None


def test_a_wrong_password_is_refused_after_hashing_it_once(client, user, monkeypatch):
    """Django's backend, listed second for earlier sessions, does not try it again."""
    hashed = []
    original = base_user.check_password
    monkeypatch.setattr(
        base_user,
        "check_password",
        lambda password, *args, **kwargs: (
            hashed.append(password) or original(password, *args, **kwargs)
        ),
    )
    response = client.post("/login/", {"username": "ada", "password": "wrong"})
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert hashed == ["wrong"]
