"""Drafts of pending questions: saved for the user's other tabs and devices, never an
answer, gone once the question is resolved."""

import html as html_lib
import json
import re

import pytest
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.urls import reverse

from chat.errors import ConversationNotFound
from chat.models import AgentState, Role
from chat.routing import websocket_urlpatterns
from core import events
from questions import resolving as questions
from questions.errors import DraftTooLong
from questions.models import QuestionDraft
from questions.payloads import Answer
from tests.fakes import PIZZA

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
TOPPINGS = {
    "header": "Toppings",
    "question": "Which toppings?",
    "multiple": True,
    "options": [{"label": "Olives"}, {"label": "Basil"}],
}


@pytest.fixture
def asked(user, conversation, model, say):
    model.asks(arguments=TOPPINGS)
    say(user, conversation, "Toppings?")
    return conversation


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:
    """The events sent to the user's pages from now on (after commit): (group, event)."""
    events_sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(events, "send", lambda group, event: events_sent.append((group, event)))
    return events_sent


@pytest.fixture
def save(committed):
    """Save a draft of q1, as committed."""

    def save(user, conversation, answers, **kwargs):
        with committed():
            return questions.save_draft(
                user=user,
                conversation_id=conversation.pk,
                tool_call_id="q1",
                answers=answers,
                **kwargs,
            )

    return save


def draft_url(conversation, call="q1"):
    return reverse("questions:draft", args=[conversation.pk, call])


def page_draft(client, conversation):
    page = client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content
    found = re.search(r'data-draft="([^"]*)"', page.decode())
    return json.loads(html_lib.unescape(found[1])) if found else None


def test_a_draft_is_saved_and_rendered_for_every_tab_and_never_answers(
    client, user, asked, sent, save
):
    draft = save(
        user, asked, [Answer(labels=["Olives", "Pineapple"], custom="extra <b>")], client="tab-1"
    )
    assert draft.data == [{"labels": ["Olives"], "custom": "extra <b>"}]  # not an option: dropped
    assert sent == [
        (
            events.user_group(user.pk),
            events.conversation_fragment(
                asked.pk,
                "questions/question.html#elsewhere",
                {"q": {"tool_call_id": "q1"}, "client": "tab-1"},
            ),
        )
    ]
    client.force_login(user)
    assert page_draft(client, asked) == [{"labels": ["Olives"], "custom": "extra <b>"}]
    # Still waiting: no answer message, the question pending.
    asked.refresh_from_db()
    assert asked.agent_state == AgentState.AWAITING_USER
    assert asked.messages.filter(role=Role.USER).count() == 1
    # Saved again: one draft, the latest.
    save(user, asked, [Answer(labels=["Basil"])])
    assert list(QuestionDraft.objects.values_list("data", "client")) == [
        ([{"labels": ["Basil"], "custom": ""}], "")
    ]


def test_another_users_draft_is_refused(asked, other_user, client, save):
    with pytest.raises(ConversationNotFound):
        save(other_user, asked, [Answer(labels=["Olives"])])
    client.force_login(other_user)
    assert client.post(draft_url(asked), {"q0": "Olives"}, headers=HTMX).status_code == 404
    assert not QuestionDraft.objects.exists()


def test_an_oversized_draft_is_refused_with_an_error_shown_in_the_block(client, user, asked, save):
    too_long = "x" * (settings.PARLEY_MAX_MESSAGE_CHARS + 1)
    with pytest.raises(DraftTooLong):
        save(user, asked, [Answer(custom=too_long)])
    with pytest.raises(DraftTooLong):
        save(user, asked, [Answer(), Answer()])  # more answers than questions
    client.force_login(user)
    response = client.post(draft_url(asked), {"q0-custom": too_long}, headers=HTMX)
    assert response.status_code == 413
    assert (response["HX-Retarget"], response["HX-Reswap"]) == ("#question-q1-alert", "innerHTML")
    assert response.content.decode() == str(DraftTooLong.default_message)
    assert not QuestionDraft.objects.exists()


def test_resolving_deletes_the_draft_and_later_drafts_are_ignored(client, user, asked, sent, save):
    save(user, asked, [Answer(labels=["Olives"])])
    questions.answer_question(
        user=user, conversation_id=asked.pk, tool_call_id="q1", answers=[Answer(labels=["Basil"])]
    )
    assert not QuestionDraft.objects.exists()
    sent.clear()
    assert save(user, asked, [Answer(labels=["Olives"])]) is None
    assert not QuestionDraft.objects.exists() and sent == []
    client.force_login(user)
    assert client.post(draft_url(asked), {"q0": "Olives"}, headers=HTMX).status_code == 204
    assert not QuestionDraft.objects.exists()


def test_rejecting_deletes_the_draft(user, conversation, model, say, save):
    model.asks(arguments=PIZZA)
    say(user, conversation)
    save(user, conversation, [Answer(custom="Calzone")])
    questions.reject_question(user=user, conversation_id=conversation.pk, tool_call_id="q1")
    assert not QuestionDraft.objects.exists()


# The consumer reads the conversation on a thread of its own: the data must be committed.
@pytest.mark.django_db(transaction=True)
async def test_other_tabs_are_told_the_question_is_being_answered_elsewhere(user, asked):
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/conversations/{asked.pk}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_input(
        {"type": "websocket.receive", "text": json.dumps({"type": "sync", "after": 10**6})}
    )
    await get_channel_layer(events.EVENTS_LAYER).group_send(
        events.user_group(user.pk),
        events.conversation_fragment(
            asked.pk,
            "questions/question.html#elsewhere",
            {"q": {"tool_call_id": "q1"}, "client": "tab-1"},
        ),
    )
    html = await communicator.receive_from()
    assert 'id="question-q1-elsewhere"' in html
    assert 'data-client="tab-1"' in html
    assert "Being answered in another tab or device…" in html
    # Another conversation's draft says nothing here.
    await get_channel_layer(events.EVENTS_LAYER).group_send(
        events.user_group(user.pk),
        events.conversation_fragment(
            asked.pk + 1,
            "questions/question.html#elsewhere",
            {"q": {"tool_call_id": "q1"}, "client": "tab-1"},
        ),
    )
    assert await communicator.receive_nothing()
    await communicator.disconnect()
