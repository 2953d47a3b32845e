"""GET /healthz: 200 when the database and the channel layer answer, 503 naming the part that
does not, within about a second, without login, session or cookie."""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from channels.layers import channel_layers
from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from config import health

pytestmark = pytest.mark.django_db

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
OK = {"status": "ok", "database": "ok", "channelLayer": "ok"}


@pytest.fixture(autouse=True)
def probe_thread(monkeypatch):
    """A probe thread for this test alone. It keeps its database connection between polls:
    closed at the end, so that nothing holds the test database open when it is dropped, and
    the thread ends, so that later tests run (and fork) in a process without it."""
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-healthz-test")
    monkeypatch.setattr(health, "database_thread", thread)
    monkeypatch.setattr(health, "_database_probe", None)
    yield thread
    thread.submit(connections.close_all).result(timeout=15)  # after any probe in flight
    thread.shutdown()


@pytest.fixture
def channel_layer(settings):
    """Use the given CHANNEL_LAYERS["default"] for one test, with a fresh layer instance."""

    def use(backend: str, **config):
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": backend, "CONFIG": config}}
        channel_layers.backends.clear()

    yield use
    channel_layers.backends.clear()


def test_healthz_is_ok_when_the_database_and_the_in_memory_layer_answer(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == OK
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"


def test_healthz_needs_no_login_and_sets_no_cookie(client):
    response = client.get("/healthz")

    assert response.status_code == 200  # not a redirect to the login page
    assert not response.cookies
    assert "Set-Cookie" not in response.headers
    assert "Cookie" not in response.get("Vary", "")  # the session was never read


def test_healthz_answers_head_and_refuses_writes(client):
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 405


def test_healthz_is_unavailable_when_the_database_fails(client, monkeypatch):
    def refuse(self):
        raise OperationalError("connection refused")

    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "database": "unavailable",
        "channelLayer": "ok",
    }
    assert response["Cache-Control"] == "no-store"


def test_healthz_answers_in_time_while_the_database_hangs_and_probes_it_once(
    client, monkeypatch, probe_thread
):
    release = threading.Event()
    calls = []

    def hang(self):
        calls.append(threading.current_thread().name)
        release.wait(10)
        raise OperationalError("timed out")

    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", hang)
    monkeypatch.setattr(health, "PROBE_TIMEOUT", 0.2)

    started = time.monotonic()
    first = client.get("/healthz")
    second = client.get("/healthz")
    elapsed = time.monotonic() - started
    release.set()
    probe_thread.submit(lambda: None).result(timeout=15)  # every probe queued has run

    assert first.status_code == second.status_code == 503
    assert second.json()["database"] == "unavailable"
    assert elapsed < 1.5
    assert len(calls) == 1  # the second poll waited for the probe in flight, started no other


def test_healthz_is_unavailable_when_redis_is_down(client, channel_layer):
    channel_layer("channels_redis.core.RedisChannelLayer", hosts=["redis://127.0.0.1:1"])

    started = time.monotonic()
    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "database": "ok",
        "channelLayer": "unavailable",
    }
    assert time.monotonic() - started < health.PROBE_TIMEOUT + 1


def test_healthz_is_ok_with_redis(client, channel_layer):
    channel_layer("channels_redis.core.RedisChannelLayer", hosts=[f"{REDIS}/0"])

    responses = [client.get("/healthz") for _ in range(3)]

    assert [response.status_code for response in responses] == [200, 200, 200]
    assert responses[-1].json() == OK


def test_healthz_stays_on_plain_http_when_https_is_enforced(client, settings):
    settings.SECURE_SSL_REDIRECT = True

    assert client.get("/login/").status_code == 301  # everything else goes to https
    assert client.get("/healthz").status_code == 200
