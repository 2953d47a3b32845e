import pytest
from asgiref.sync import async_to_sync
from django.core.cache import cache

from chat import runner, runtime, services
from tests.fakes import AskingModel


@pytest.fixture(autouse=True)
def turns_run_inline(monkeypatch, settings):
    """In-process tests run each agent turn to its end inside the commit hook that dispatches
    it, without delays, and start no runner loop or sweep of their own."""
    settings.SCRIPTED_AGENT_DELAY = 0
    monkeypatch.setattr(runner, "dispatch", run_now)
    monkeypatch.setattr(runner, "start_in_this_loop", lambda: None)


def run_now(conversation_id: int) -> None:
    async_to_sync(runtime.run_turn)(conversation_id)


@pytest.fixture(autouse=True)
def fresh_limits():
    """Each test starts with no rate-limit counts (chat.limits keeps them in the cache)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    """Turns are dispatched but not run: the ids of the conversations dispatched, in order."""
    ids: list[int] = []
    monkeypatch.setattr(runner, "dispatch", ids.append)
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
