"""Fixtures of the chat tests: a fake model in place of the provider, the events sent, and a
conversation paused at a question."""

import pytest

from chat import services
from chat.engine import runtime
from core import events


@pytest.fixture
def use(monkeypatch):
    """`use(provider)`: the turns of this test ask `provider` instead of the configured one."""

    def use(provider):
        monkeypatch.setattr(runtime, "get_provider", lambda: provider)
        return provider

    return use


@pytest.fixture
def no_backoff(monkeypatch):
    """A provider's retryable failure is retried at once."""
    monkeypatch.setattr(runtime, "RETRY_BASE_SECONDS", 0)


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:
    """The events sent to the channel layer's groups, as (group, event), in order."""
    recorded: list[tuple[str, dict]] = []
    monkeypatch.setattr(events, "send", lambda group, event: recorded.append((group, event)))
    return recorded


@pytest.fixture
def no_auth_events(monkeypatch):
    """`auth.changed` events are lost (a channel layer may drop one): sockets find an ended
    session by reading it again."""
    send_on_commit = events.send_on_commit

    def without_auth_changes(group, event):
        if event["type"] != "auth.changed":
            send_on_commit(group, event)

    monkeypatch.setattr(events, "send_on_commit", without_auth_changes)


@pytest.fixture
def post(committed):
    """`post(user, conversation, text)`: the user sends `text`, and the turn it starts runs
    to its end (or its pause) after the commit; returns the message."""

    def post(user, conversation, text: str):
        with committed():
            return services.post_user_message(user=user, conversation_id=conversation.pk, text=text)

    return post


@pytest.fixture
def ask(model, post):
    """`ask(user, conversation)`: the user says "Lunch?" and the agent's turn asks a question
    (the model's PIZZA, call id q1 unless told), then waits for the answer."""

    def ask(user, conversation, call_id: str = "q1") -> None:
        model.asks(call_id=call_id)
        post(user, conversation, "Lunch?")

    return ask
