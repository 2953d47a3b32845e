"""Signing in goes through Django's ModelBackend; sessions signed in by the previous release
name the old backend (accounts.backends.CompiledModelBackend), whose shim still reads their
user, so nobody is signed out by the upgrade, and authenticates nobody, so a wrong password
is still hashed only once."""

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.sessions.backends.db import SessionStore

from chat.live import sessions

pytestmark = pytest.mark.django_db

OLD_BACKEND = "accounts.backends.CompiledModelBackend"
DJANGOS = "django.contrib.auth.backends.ModelBackend"


def signed_in_session(backend: str, user) -> str:
    """The key of a session signed in as `user` through `backend`."""
    session = SessionStore()
    session.update(
        {
            SESSION_KEY: str(user.pk),
            BACKEND_SESSION_KEY: backend,
            HASH_SESSION_KEY: user.get_session_auth_hash(),
        }
    )
    session.create()
    return session.session_key


@pytest.mark.parametrize("backend", [OLD_BACKEND, DJANGOS])
def test_a_signed_in_session_opens_the_pages_whichever_backend_signed_it_in(client, user, backend):
    key = signed_in_session(backend, user)
    client.cookies["sessionid"] = key

    assert client.get("/conversations/").status_code == 200
    assert sessions.session_user_id(key) == user.pk  # what open sockets re-check


@pytest.mark.parametrize("backend", [OLD_BACKEND, DJANGOS])
def test_an_old_session_of_a_deactivated_user_opens_no_page(client, user, backend):
    key = signed_in_session(backend, user)
    user.is_active = False
    user.save()
    client.cookies["sessionid"] = key

    response = client.get("/conversations/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert sessions.session_user_id(key) is None


def test_signing_in_records_djangos_model_backend(client, user):
    response = client.post("/login/", {"username": "ada", "password": "pw-ada-123"})

    assert response.status_code == 302
    assert client.session[BACKEND_SESSION_KEY] == DJANGOS
    assert client.get("/conversations/").status_code == 200


def test_a_wrong_password_is_refused_after_hashing_it_once(client, user, monkeypatch):
    """The old backend, listed after Django's for earlier sessions, does not try it again.
    (The in-process tests hash users' passwords with MD5: tests/conftest.py.)"""
    verified = []
    original = MD5PasswordHasher.verify

    def counted(self, password, encoded):
        verified.append(password)
        return original(self, password, encoded)

    monkeypatch.setattr(MD5PasswordHasher, "verify", counted)

    response = client.post("/login/", {"username": "ada", "password": "wrong"})

    assert response.status_code == 200 and SESSION_KEY not in client.session
    assert verified == ["wrong"]
