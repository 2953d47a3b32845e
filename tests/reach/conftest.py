"""Shared by the e-mail and push tests: a user who asked for questions by e-mail, and a
question asked in their conversation with the agent's words before it."""

import pytest

from accounts.models import Preferences
from chat import services
from chat.engine.providers.base import TextDelta
from webhooks import delivery

PUBLIC_URL = "https://parley.example.org"


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.PUBLIC_URL = PUBLIC_URL


@pytest.fixture
def mailed_user(user):
    """ada, with an address and "Email me questions" on."""
    user.email = "ada@example.org"
    user.save(update_fields=["email"])
    Preferences.objects.create(user=user, email_questions=True)
    return user


@pytest.fixture
def ask(model, committed):
    """`ask(user, conversation, tool="question", arguments=None)`: the agent says a line,
    then asks (by default the Pizza question: one choice among three)."""

    def ask(user, conversation, tool="question", arguments=None):
        model.asks(tool, arguments, also=[TextDelta("I checked the menu of Luigi's.")])
        with committed():
            services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")

    return ask


@pytest.fixture
def sweep(committed):
    """`sweep()`: one round of the outbox's delivery, as every process runs it."""

    def sweep() -> int:
        with committed():
            return delivery.deliver_due()

    return sweep
