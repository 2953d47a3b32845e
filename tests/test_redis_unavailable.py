"""While Redis cannot be reached, what needs it answers 503 with Retry-After and a message to
try again in a moment, never a 500: logging in and sending a message (both counted against
the limits in Redis), and opening an event stream. The settings are config/settings.py's for
a REDIS_URL on a closed port (the cache and both channel layers)."""

import runpy

import pytest
from django.test import Client, override_settings

from api.tokens import create_token
from chat import services
from chat.models import Message
from core.errors import ServiceUnavailable
from tests.live_server import ROOT

pytestmark = pytest.mark.django_db

# Nothing listens on port 1: every connection is refused at once.
CLOSED = "redis://127.0.0.1:1/0"
TRY_AGAIN = str(ServiceUnavailable.default_message)


@pytest.fixture
def redis_down():
    """config/settings.py's Redis settings for a REDIS_URL nobody answers, for the test's
    length (restored before the suite's fixtures clear the cache)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REDIS_URL", CLOSED)
        made = runpy.run_path(str(ROOT / "config/settings.py"))
    with override_settings(
        REDIS_URL=CLOSED, CACHES=made["CACHES"], CHANNEL_LAYERS=made["CHANNEL_LAYERS"]
    ):
        yield


@pytest.fixture
def browser():
    """A client that gets Django's 500 page, as a person would, rather than the exception."""
    return Client(raise_request_exception=False)


def assert_try_again(response, content_type: str) -> None:
    assert response.status_code == 503, response.content[:200]
    assert response["Retry-After"] == str(ServiceUnavailable.retry_after)
    assert response["Content-Type"].startswith(content_type)


def test_logging_in_says_try_again_in_a_moment(user, redis_down, browser):
    response = browser.post("/login/", {"username": "ada", "password": "pw-ada-123"})

    assert_try_again(response, "text/html")
    assert TRY_AGAIN in response.content.decode()
    assert "sessionid" not in response.cookies


def test_sending_a_message_says_try_again_in_a_moment_and_sends_nothing(user, browser, request):
    conversation = services.create_conversation(owner=user)
    token = create_token(user=user, name="cli")[1]
    browser.force_login(user)
    request.getfixturevalue("redis_down")

    composer = browser.post(
        f"/c/{conversation.pk}/messages/", {"text": "hello"}, headers={"HX-Request": "true"}
    )
    # htmx shows the text in the composer's alert (static/parley.js); the composer, not
    # swapped, keeps what was typed.
    assert_try_again(composer, "text/plain")
    assert composer.content.decode() == TRY_AGAIN

    page = browser.post(f"/c/{conversation.pk}/messages/", {"text": "hello"})
    assert_try_again(page, "text/html")
    assert TRY_AGAIN in page.content.decode()

    api = Client(raise_request_exception=False).post(
        f"/api/v1/conversations/{conversation.pk}/messages",
        {"content": "hello"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert_try_again(api, "application/json")
    assert api.json() == {"message": TRY_AGAIN}

    assert not Message.objects.filter(conversation=conversation).exists()


def test_opening_an_event_stream_says_try_again_in_a_moment(user, request):
    conversation = services.create_conversation(owner=user)
    token = create_token(user=user, name="cli")[1]
    request.getfixturevalue("redis_down")

    response = Client(raise_request_exception=False).get(
        f"/api/v1/conversations/{conversation.pk}/events",
        headers={"Authorization": f"Bearer {token}"},
    )

    assert_try_again(response, "application/json")
    assert response.json() == {"message": TRY_AGAIN}
