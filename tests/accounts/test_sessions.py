"""The session engine (accounts.sessions) reads what Django's database sessions read."""

from datetime import timedelta

import pytest
from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from accounts.sessions import SessionStore

pytestmark = pytest.mark.django_db


def stored(data: dict) -> str:
    session = SessionStore()
    session.update(data)
    session.create()
    return session.session_key


@pytest.mark.parametrize("key", ["kept", "expired", "unknown", "", None])
def test_a_session_reads_as_djangos_database_sessions_read_it(key):
    keys = {
        "kept": stored({"answer": "Alpha", "ünïcode": "✓"}),
        "expired": stored({"answer": "Beta"}),
        "unknown": "x" * 32,
        "": "",
        None: None,
    }
    Session.objects.filter(session_key=keys["expired"]).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    ours, djangos = SessionStore(keys[key]), db.SessionStore(keys[key])
    assert ours.load() == djangos.load()
    assert ours.session_key == djangos.session_key
    if key == "kept":
        assert ours.load() == {"answer": "Alpha", "ünïcode": "✓"}
    else:
        assert ours.load() == {} and ours.session_key is None


def test_a_session_is_read_in_one_query(django_assert_num_queries):
    key = stored({"answer": "Alpha"})
    with django_assert_num_queries(1):
        assert SessionStore(key)["answer"] == "Alpha"


def test_the_sessions_of_requests_are_these(client, user):
    """Requests, logins and the sockets' re-checks (chat.sessions) use this engine."""
    from django.conf import settings

    from chat import sessions

    client.force_login(user)
    assert settings.SESSION_ENGINE == "accounts.sessions"
    assert isinstance(client.session, SessionStore)
    assert sessions.session_user_id(client.session.session_key) == user.pk
    assert client.get("/").status_code == 200
