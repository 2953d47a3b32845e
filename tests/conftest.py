import pytest

from chat import services


@pytest.fixture(autouse=True)
def _fast_inline_agent(settings):
    """Service tests run each agent turn to its end inside the commit hook, without delays."""
    settings.PARLEY_RUN_INLINE = True
    settings.SCRIPTED_AGENT_DELAY = 0


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-ada-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")


@pytest.fixture
def conversation(user):
    return services.create_conversation(owner=user, title="First chat")
