"""Deadlines (spec 6.1, "Expiry"): the server resolves a question that waited too long as
expired, exactly once, never picking an option; the model is told and the turn resumes. A
reminder goes out once before that."""

import threading

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection

from accounts.models import Preferences
from chat import events, services
from chat.blocks import ToolResultBlock, parse_blocks
from chat.models import AgentState, Role
from chat.routing import websocket_urlpatterns
from questions import deadlines
from questions import services as questions
from questions.blocks import Answer, payload_of
from questions.errors import QuestionAlreadyResolved
from questions.models import Deadline
from questions.services import EXPIRED_RESULT
from tests.factories import add_message

pytestmark = pytest.mark.django_db(transaction=True)


def question(conversation):
    for message in conversation.messages.filter(role=Role.ASSISTANT).order_by("-order"):
        for block in parse_blocks(message.blocks):
            if (payload := payload_of(block)) is not None:
                return block, payload
    raise AssertionError("no question block")


def results_for(conversation, call_id="q1"):
    return [
        b
        for m in conversation.messages.all()
        for b in parse_blocks(m.blocks)
        if isinstance(b, ToolResultBlock) and b.tool_call_id == call_id
    ]


@pytest.fixture
def expiring(settings, user, conversation, model):
    settings.QUESTION_EXPIRE_AFTER = 60
    settings.QUESTION_REMIND_BEFORE = None
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    return conversation


def test_the_deadline_is_fixed_when_asked_and_shown(client, user, expiring):
    block, payload = question(expiring)
    deadline = Deadline.objects.get(conversation=expiring, tool_call_id="q1")
    assert payload.expires_at == deadline.expires_at
    assert block.extra["expiresAt"]
    client.force_login(user)
    html = client.get(f"/c/{expiring.pk}/").content.decode()
    assert "Expires " in html


def test_nothing_expires_before_its_time(expiring, clock):
    clock.advance(59)
    deadlines.sweep()
    expiring.refresh_from_db()
    assert expiring.agent_state == AgentState.AWAITING_USER


def test_an_expired_question_is_resolved_once_and_the_model_is_told(expiring, model, clock):
    clock.advance(61)
    deadlines.sweep()
    deadlines.sweep()  # a second sweep (or another process) changes nothing
    expiring.refresh_from_db()
    block, payload = question(expiring)
    assert (block.status, payload.question_resolution) == ("denied", "expired")
    assert payload.answers is None and payload.answer_text is None  # no option was picked
    assert (payload.answered_by, payload.answered_via) == (None, "expiry")
    [result] = results_for(expiring)
    assert result.is_error and result.content == EXPIRED_RESULT
    # The turn resumed: the model read the expiry and went on.
    assert expiring.agent_state == AgentState.IDLE
    last_request = model.histories[-1]
    assert last_request[-1].blocks[-1].content == EXPIRED_RESULT
    assert Deadline.objects.get(conversation=expiring).expired


def test_an_answer_after_the_expiry_is_already_answered(user, expiring, clock):
    clock.advance(61)
    deadlines.sweep()
    with pytest.raises(QuestionAlreadyResolved):
        questions.answer_question(
            user=user,
            conversation_id=expiring.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )


def test_an_answered_question_never_expires(user, expiring, clock):
    questions.answer_question(
        user=user,
        conversation_id=expiring.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
    )
    clock.advance(61)
    deadlines.sweep()
    _, payload = question(expiring)
    assert payload.question_resolution == "replied"
    assert len(results_for(expiring)) == 1


def test_the_expired_block_shows_expired(client, user, expiring, clock):
    clock.advance(61)
    deadlines.sweep()
    client.force_login(user)
    html = client.get(f"/c/{expiring.pk}/").content.decode()
    assert '<p class="question-rejected question-expired">Expired</p>' in html


@pytest.mark.parametrize(
    ("server", "own", "expires"), [(None, None, False), (60, 0, False), (None, 30, True)]
)
def test_the_users_own_setting_overrides_the_server(
    settings, user, conversation, model, server, own, expires
):
    settings.QUESTION_EXPIRE_AFTER = server
    Preferences.objects.create(user=user, question_expire_after=own)
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    _, payload = question(conversation)
    assert (payload.expires_at is not None) == expires
    assert Deadline.objects.filter(conversation=conversation).exists() == expires


def test_a_reminder_goes_out_once_at_80_percent(
    expiring, clock, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(events, "_send_to_group", lambda group, event: sent.append((group, event)))
    clock.advance(47)
    deadlines.sweep()
    assert not [e for _, e in sent if e["type"] == "questions.reminder"]
    clock.advance(2)  # 49 s of 60: past 80 %
    with django_capture_on_commit_callbacks(execute=True):
        deadlines.sweep()
        deadlines.sweep()
    reminders = [(g, e) for g, e in sent if e["type"] == "questions.reminder"]
    assert reminders == [
        (
            events.attention_group(expiring.owner_id),
            {
                "type": "questions.reminder",
                "conversation_id": expiring.pk,
                "tool_call_id": "q1",
                "expires_at": Deadline.objects.get(conversation=expiring).expires_at.isoformat(),
            },
        )
    ]


async def test_an_open_page_survives_a_reminder_event(user, conversation):
    await database_sync_to_async(add_message)(conversation.pk, "still here")
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    # Sent to the whole user group, as an earlier release does (now: the attention group).
    await get_channel_layer(events.EVENTS_LAYER).group_send(
        events.user_group(user.pk),
        {"type": "questions.reminder", "conversation_id": conversation.pk, "tool_call_id": "q1"},
    )
    await communicator.send_json_to({"type": "sync", "after": 0})
    assert "still here" in await communicator.receive_from()
    await communicator.disconnect()


@pytest.mark.parametrize("rounds", range(3))
def test_an_answer_and_the_expiry_at_once_have_one_winner(user, expiring, clock, rounds):
    clock.advance(61)
    barrier = threading.Barrier(2)
    outcomes = {}

    def answer():
        try:
            barrier.wait()
            questions.answer_question(
                user=user,
                conversation_id=expiring.pk,
                tool_call_id="q1",
                answers=[Answer(labels=["Funghi"])],
            )
            outcomes["answer"] = True
        except QuestionAlreadyResolved:
            outcomes["answer"] = False
        finally:
            connection.close()

    def expire():
        try:
            barrier.wait()
            outcomes["expiry"] = questions.expire_question(
                conversation_id=expiring.pk, tool_call_id="q1"
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=answer), threading.Thread(target=expire)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes.values()) == [False, True]
    assert len(results_for(expiring)) == 1
