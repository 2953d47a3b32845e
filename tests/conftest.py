import os
from functools import partial

import channels.db
import pytest
from asgiref.sync import async_to_sync
from django.core.cache import cache

from chat import services
from chat.engine import dispatch, runner, runtime
from tests.fakes import AskingModel
from tests.live_server import postgres_database


@pytest.fixture(autouse=True)
def turns_run_inline(monkeypatch, settings):
    """In-process tests run each agent turn to its end where it is dispatched (after
    commit), on the dispatching thread, without delays; no runner loop or sweep starts."""
    settings.SCRIPTED_AGENT_DELAY = 0
    monkeypatch.setattr(dispatch, "start", run_now)
    monkeypatch.setattr(runner, "start_in_this_loop", lambda: None)


def run_now(conversation_id: int) -> None:
    async_to_sync(runtime.run_turn)(conversation_id)


@pytest.fixture(autouse=True)
def one_transaction(request, monkeypatch):
    """A test that rolls back runs in one transaction, and a turn it runs works in it too
    (on the test's thread: run_now). Channels closes the thread's connection around each
    database call when the connection is inside a transaction it did not open itself, which
    would end the test's: not within such a test."""
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or (
        marker is not None and marker.kwargs.get("transaction", False)
    )
    if not transactional:
        monkeypatch.setattr(channels.db, "close_old_connections", lambda: None)


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """`with committed():` what the block's transactions ask for after commit (a turn run,
    events sent) happens as the block ends, as after a real commit; the test itself still
    rolls back."""
    return partial(django_capture_on_commit_callbacks, execute=True)


@pytest.fixture(autouse=True)
def quick_password_hashes(request, settings):
    """Users that in-process tests make get a one-round hash. Django's default, which the
    settings keep (PBKDF2, 1,500,000 rounds: 0.3-0.9 s a hash on a 2-core machine, minutes
    of a run), still verifies here, and is what the servers of the live and browser tests
    hash and check every password with."""
    if request.node.get_closest_marker("live") is None:
        settings.PASSWORD_HASHERS = [
            "django.contrib.auth.hashers.MD5PasswordHasher",
            *settings.PASSWORD_HASHERS,
        ]


@pytest.fixture(autouse=True)
def fresh_limits():
    """Each test starts with no rate-limit counts (core.limits keeps them in the cache)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    """Turns are dispatched but not run: the ids of the conversations dispatched, in order."""
    ids: list[int] = []
    monkeypatch.setattr(dispatch, "start", ids.append)
    return ids


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-ada-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")


@pytest.fixture
def conversation(user):
    return services.create_conversation(owner=user, title="First chat")


@pytest.fixture
def model(monkeypatch) -> AskingModel:
    """A fake model in place of the provider: `model.asks(tool, arguments)` makes its next
    turn ask that question, then reply "Thanks: <tool result>" once answered."""
    fake = AskingModel()
    monkeypatch.setattr(runtime, "get_provider", lambda: fake)
    return fake


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path):
    """A fresh database for a live server: a SQLite file, then a new PostgreSQL database
    (TEST_POSTGRES_URL names the server and the database to connect to for creating it)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'live.sqlite3'}"
    else:
        admin_url = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
        with postgres_database(admin_url) as url:
            yield url


@pytest.fixture
def clock(monkeypatch):
    """Move the server's clock forward: `clock.advance(seconds)` (django.utils.timezone.now)."""
    from datetime import timedelta

    from django.utils import timezone

    real_now = timezone.now

    class Clock:
        offset = timedelta()

        def advance(self, seconds: float) -> None:
            self.offset += timedelta(seconds=seconds)

    fake = Clock()
    monkeypatch.setattr(timezone, "now", lambda: real_now() + fake.offset)
    return fake


@pytest.fixture
def one_minute(monkeypatch):
    """The per-minute limits count in fixed one-minute windows (core.limits): hold their clock
    in the middle of one, so a test's counts never straddle two."""
    from core import limits

    held = int(limits.time.time()) // 60 * 60 + 30
    monkeypatch.setattr(limits.time, "time", lambda: held)
