"""The bot's messages go through the outbox: Slack's 429 is retried after its Retry-After, a
Slack that is down delays Slack alone (the browser answers as ever), and a message is
rewritten when its question expires, is reassigned or is cancelled."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from chat import services, sharing
from chat.models import AgentState
from questions import resolving
from questions.models import QuestionStatus
from questions.payloads import Answer
from slackbot.models import SlackMessage
from tests.factories import set_state
from tests.slackbot.conftest import ADA, link
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def slack_rows():
    return Delivery.objects.filter(channel=DeliveryChannel.SLACK).order_by("pk")


def test_a_429_is_retried_after_its_retry_after(linked, conversation, ask, slack, sweep, clock):
    slack.fail("chat.postMessage", 429, {"Retry-After": "42"})
    ask(linked, conversation)
    before = timezone.now()
    sweep()

    [row] = slack_rows()
    assert (row.status, row.attempts, row.last_status_code) == (DeliveryStatus.PENDING, 1, 429)
    wait = row.next_attempt_at - before
    assert timedelta(seconds=41) <= wait <= timedelta(seconds=45)
    clock.advance(30)
    sweep()  # not due yet
    assert len(slack.called("chat.postMessage")) == 1

    clock.advance(15)
    sweep()
    row.refresh_from_db()
    assert (row.status, row.attempts) == (DeliveryStatus.DELIVERED, 2)
    assert len(slack.called("chat.postMessage")) == 2
    assert SlackMessage.objects.count() == 1


def test_slack_down_delays_slack_alone(linked, conversation, ask, slack, sweep, client, committed):
    slack.fail("chat.postMessage", 500, times=3)
    question = ask(linked, conversation)
    sweep()
    [row] = slack_rows()
    assert (row.status, row.last_status_code) == (DeliveryStatus.PENDING, 500)

    client.force_login(linked)
    url = reverse("questions:answer", args=[conversation.pk, question.tool_call_id])
    with committed():
        assert client.post(url, {"q0": "Funghi"}).status_code == 302
    question.refresh_from_db()
    assert (question.status, question.answered_via) == (QuestionStatus.ANSWERED, "browser")


def test_slack_unreachable_delays_slack_alone(linked, conversation, ask, slack, sweep, settings):
    settings.SLACK_API_URL = "http://127.0.0.1:9/api/"  # nothing listens: connection refused
    question = ask(linked, conversation)
    sweep()
    [row] = slack_rows()
    assert row.status == DeliveryStatus.PENDING
    assert row.last_error
    resolving.answer_question(
        user=linked,
        conversation_id=conversation.pk,
        tool_call_id=question.tool_call_id,
        answers=[Answer(labels=["Funghi"])],
    )
    question.refresh_from_db()
    assert question.status == QuestionStatus.ANSWERED


def test_an_expired_question_s_message_says_so(linked, conversation, ask, slack, sweep, clock):
    question = ask(linked, conversation)
    sweep()
    question.expires_at = timezone.now()
    question.save(update_fields=["expires_at"])
    clock.advance(1)
    assert resolving.expire_question(question_id=question.pk)
    sweep()
    [update] = slack.called("chat.update")
    assert update["text"] == "Expired before anyone answered."


def test_a_question_answered_by_a_message_s_message_says_so(
    linked, conversation, ask, slack, sweep, committed
):
    question = ask(linked, conversation)
    sweep()
    with committed():
        services.post_user_message(user=linked, conversation_id=conversation.pk, text="Never mind")
    question.refresh_from_db()
    assert question.status != QuestionStatus.PENDING
    sweep()
    [update] = slack.called("chat.update")
    assert "Answered by ada in Parley." in update["text"]


def test_a_cancelled_question_s_message_says_so(linked, conversation, ask, slack, sweep, clock):
    question = ask(linked, conversation)
    sweep()
    # Its turn ended some other way while it waited: the deadline's sweep cancels it.
    set_state(conversation.pk, AgentState.IDLE)
    question.expires_at = timezone.now()
    question.save(update_fields=["expires_at"])
    clock.advance(1)
    resolving.expire_question(question_id=question.pk)
    question.refresh_from_db()
    assert question.status == QuestionStatus.CANCELLED
    sweep()
    [update] = slack.called("chat.update")
    assert update["text"] == "No longer waits for an answer."


def test_a_question_assigned_to_someone_else_is_posted_to_them_and_closed_for_the_others(
    linked, conversation, ask, slack, sweep, django_user_model
):
    grace = django_user_model.objects.create_user(username="grace", password="pw-grace-123")
    link(grace, "U0GRACE")
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="participant"
    )
    question = ask(linked, conversation)
    sweep()
    assert sorted(p["channel"] for p in slack.called("chat.postMessage")) == [ADA, "U0GRACE"]

    resolving.assign_question(
        user=linked,
        conversation_id=conversation.pk,
        tool_call_id=question.tool_call_id,
        assignee_id=grace.pk,
    )
    sweep()
    [update] = slack.called("chat.update")
    assert update["channel"] == "D" + ADA
    assert update["text"] == "Assigned to grace in Parley."
    # Grace has it already: not posted again.
    assert len(slack.called("chat.postMessage")) == 2


def test_a_question_assigned_before_its_post_went_out_is_posted_once(
    linked, conversation, ask, slack, sweep, django_user_model
):
    """Asked (a post queued for each linked member), then assigned to one of them before the
    outbox ran: they get one direct message, not one per event."""
    grace = django_user_model.objects.create_user(username="grace", password="pw-grace-123")
    link(grace, "U0GRACE")
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="participant"
    )
    question = ask(linked, conversation)
    resolving.assign_question(
        user=linked,
        conversation_id=conversation.pk,
        tool_call_id=question.tool_call_id,
        assignee_id=grace.pk,
    )
    sweep()
    sweep()
    assert [p["channel"] for p in slack.called("chat.postMessage")] == ["U0GRACE"]
    assert SlackMessage.objects.filter(recipient=grace).count() == 1


def test_a_user_who_is_not_linked_gets_nothing(user, conversation, ask, slack, sweep):
    ask(user, conversation)
    sweep()
    assert slack.calls == []
    assert not slack_rows().exists()


def test_a_participant_made_a_viewer_is_told_the_question_no_longer_waits_for_them(
    linked, conversation, ask, slack, sweep, django_user_model
):
    grace = django_user_model.objects.create_user(username="grace", password="pw-grace-123")
    link(grace, "U0GRACE")
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="participant"
    )
    ask(linked, conversation)
    sweep()
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="viewer"
    )
    sweep()
    [update] = slack.called("chat.update")
    assert (update["channel"], update["text"]) == ("DU0GRACE", "No longer waits for your answer.")
