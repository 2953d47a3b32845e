"""Deadlines (spec 6.1, "Expiry"): the server resolves a question that waited too long as
expired, exactly once, never picking an option; the model is told and the turn resumes. A
reminder goes out once before that."""

import threading
from datetime import timedelta

import pytest
from django.db import connection

from accounts.models import Preferences
from chat import services
from chat.blocks import ToolResultBlock, parse_blocks
from chat.models import AgentState
from core import events
from questions import deadlines, notifications
from questions import resolving as questions
from questions.answers import EXPIRED_RESULT
from questions.errors import QuestionAlreadyResolved
from questions.models import QuestionStatus
from questions.payloads import Answer, payload_of
from tests.factories import set_state

# Also run on PostgreSQL (make test): the sweep's partial indexes and conditional updates.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def results_for(conversation, call_id="q1"):
    return [
        b
        for m in conversation.messages.all()
        for b in parse_blocks(m.blocks)
        if isinstance(b, ToolResultBlock) and b.tool_call_id == call_id
    ]


@pytest.fixture
def expiring(settings, user, conversation, model, say):
    settings.QUESTION_EXPIRE_AFTER = 60
    settings.QUESTION_REMIND_BEFORE = None
    model.asks()
    say(user, conversation)
    return conversation


@pytest.fixture
def sweep(committed):
    """A sweep of the deadlines, as committed (a resumed turn runs to its end)."""

    def sweep():
        with committed():
            deadlines.sweep()

    return sweep


def test_the_deadline_is_fixed_when_asked_and_shown(client, user, expiring, row, block_of):
    question = row(expiring)
    assert question.expires_at - question.created_at == timedelta(seconds=60)
    block = block_of(question)
    assert payload_of(block).expires_at == question.expires_at
    assert block.extra["expiresAt"]
    client.force_login(user)
    html = client.get(f"/c/{expiring.pk}/").content.decode()
    assert "Expires " in html


def test_nothing_expires_before_its_time(expiring, clock, sweep, row):
    clock.advance(59)
    sweep()
    expiring.refresh_from_db()
    assert expiring.agent_state == AgentState.AWAITING_USER
    assert row(expiring).status == QuestionStatus.PENDING
    assert not questions.expire_question(question_id=row(expiring).pk)


def test_an_expired_question_is_resolved_once_and_the_model_is_told(
    expiring, model, clock, sweep, row, block_of
):
    clock.advance(61)
    sweep()
    sweep()  # a second sweep (or another process) changes nothing
    assert not questions.expire_question(question_id=row(expiring).pk)
    expiring.refresh_from_db()
    question = row(expiring)
    block = block_of(question)
    payload = payload_of(block)
    assert (block.status, payload.question_resolution) == ("denied", "expired")
    assert payload.answers is None and payload.answer_text is None  # no option was picked
    assert (payload.answered_by, payload.answered_via) == (None, "expiry")
    assert question.status == QuestionStatus.EXPIRED
    [result] = results_for(expiring)
    assert result.is_error and result.content == EXPIRED_RESULT
    # The turn resumed: the model read the expiry and went on.
    assert expiring.agent_state == AgentState.IDLE
    last_request = model.histories[-1]
    assert last_request[-1].blocks[-1].content == EXPIRED_RESULT


def test_an_answer_after_the_expiry_is_already_answered(user, expiring, clock, sweep):
    clock.advance(61)
    sweep()
    with pytest.raises(QuestionAlreadyResolved):
        questions.answer_question(
            user=user,
            conversation_id=expiring.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )


def test_an_answered_question_never_expires(user, expiring, clock, sweep, committed, row):
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=expiring.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    clock.advance(61)
    sweep()
    assert not questions.expire_question(question_id=row(expiring).pk)
    question = row(expiring)
    assert question.status == QuestionStatus.ANSWERED
    assert question.payload.question_resolution == "replied"
    assert len(results_for(expiring)) == 1


def test_the_expired_block_shows_expired(client, user, expiring, clock, sweep):
    clock.advance(61)
    sweep()
    client.force_login(user)
    html = client.get(f"/c/{expiring.pk}/").content.decode()
    assert '<p class="question-rejected question-expired">Expired</p>' in html


def test_a_pending_question_of_a_conversation_that_moved_on_is_cancelled_not_resumed(
    monkeypatch, expiring, model, clock, sweep, row, block_of
):
    """A question left pending by an earlier version in a conversation that no longer waits
    for it can never be answered: its deadline cancels it, and nothing resumes."""
    set_state(expiring.pk, AgentState.IDLE)
    told = []
    monkeypatch.setattr(notifications, "publish", told.append)
    requests = len(model.histories)
    clock.advance(61)
    sweep()
    question = row(expiring)
    assert question.status == QuestionStatus.CANCELLED
    assert not questions.expire_question(question_id=question.pk)  # once
    assert (question.answered_by, question.answered_via, question.answers) == (None, "", None)
    block = block_of(question)
    assert block == question.block
    assert (block.status, payload_of(block).question_resolution) == ("denied", "cancelled")
    assert results_for(expiring) == []  # the model is told nothing
    expiring.refresh_from_db()
    assert expiring.agent_state == AgentState.IDLE
    assert len(model.histories) == requests
    assert told == []  # nobody answered it: no event for the webhooks


@pytest.mark.parametrize(
    ("server", "own", "expires"), [(None, None, False), (60, 0, False), (None, 30, True)]
)
def test_the_users_own_setting_overrides_the_server(
    settings, user, conversation, model, say, row, server, own, expires
):
    settings.QUESTION_EXPIRE_AFTER = server
    Preferences.objects.create(user=user, question_expire_after=own)
    model.asks()
    say(user, conversation)
    question = row(conversation)
    assert (question.expires_at is not None) == expires
    assert (question.payload.expires_at is not None) == expires
    if expires:
        assert question.expires_at - question.created_at == timedelta(seconds=own)


def test_a_reminder_goes_out_once_at_80_percent(expiring, clock, sweep, monkeypatch, row):
    sent = []
    monkeypatch.setattr(events, "send", lambda group, event: sent.append((group, event)))
    question = row(expiring)
    assert question.remind_at == question.expires_at - timedelta(seconds=12)
    clock.advance(47)
    sweep()
    assert not [e for _, e in sent if e["type"] == "questions.reminder"]
    clock.advance(2)  # 49 s of 60: past 80 %
    sweep()
    sweep()
    assert not questions.send_reminder(question_id=question.pk)
    reminders = [(g, e) for g, e in sent if e["type"] == "questions.reminder"]
    assert reminders == [
        (
            events.attention_group(expiring.owner_id),
            {
                "type": "questions.reminder",
                "conversation_id": expiring.pk,
                "tool_call_id": "q1",
                "expires_at": question.expires_at.isoformat(),
            },
        )
    ]
    assert row(expiring).reminded_at is not None
    assert row(expiring).status == QuestionStatus.PENDING  # a reminder resolves nothing


@pytest.mark.parametrize(
    ("before", "reminded_before"), [(None, 12), (30, 30), (0, None), (60, None), (90, None)]
)
def test_the_reminder_is_due_the_setting_before_the_deadline_if_that_is_after_the_ask(
    settings, user, conversation, model, say, row, before, reminded_before
):
    settings.QUESTION_EXPIRE_AFTER = 60
    settings.QUESTION_REMIND_BEFORE = before
    model.asks()
    say(user, conversation)
    question = row(conversation)
    if reminded_before is None:
        assert question.remind_at is None
    else:
        assert question.expires_at - question.remind_at == timedelta(seconds=reminded_before)


def test_a_deadline_of_a_question_or_conversation_that_is_gone_expires_nothing(
    monkeypatch, user, expiring, clock, row
):
    clock.advance(61)
    question_id = row(expiring).pk
    assert not questions.expire_question(question_id=question_id + 1)
    # The conversation is deleted as the sweep reaches its question.
    lock = questions.lock

    def deleted_first(conversation_id):
        services.delete_conversation(user=user, conversation_id=conversation_id)
        return lock(conversation_id)

    monkeypatch.setattr(questions, "lock", deleted_first)
    assert not questions.expire_question(question_id=question_id)


def test_a_resolved_question_gets_no_reminder(user, expiring, clock, sweep, committed, row):
    with committed():
        questions.reject_question(user=user, conversation_id=expiring.pk, tool_call_id="q1")
    clock.advance(49)
    sweep()
    assert not questions.send_reminder(question_id=row(expiring).pk)
    assert row(expiring).reminded_at is None


# Two threads race for the question, each in its own transaction on its own connection.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rounds", range(3))
def test_an_answer_and_the_expiry_at_once_have_one_winner(user, expiring, clock, row, rounds):
    clock.advance(61)
    question_id = row(expiring).pk
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
            outcomes["expiry"] = questions.expire_question(question_id=question_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=answer), threading.Thread(target=expire)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes.values()) == [False, True]
    assert len(results_for(expiring)) == 1
    winner = QuestionStatus.ANSWERED if outcomes["answer"] else QuestionStatus.EXPIRED
    assert row(expiring).status == winner
