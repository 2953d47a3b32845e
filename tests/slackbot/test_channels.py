"""A conversation connected to a Slack channel by its owner: its questions are posted there
instead of to direct messages, answered there by its members who linked their account, and
rewritten there once closed; the bot must be in the channel."""

import pytest
from django.urls import reverse

from chat import sharing
from questions.models import QuestionStatus
from slackbot.models import RefusalReason, SlackChannel, SlackMessage, SlackRefusal
from tests.slackbot.conftest import click, link

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

CHANNEL = "C0PIZZA"


@pytest.fixture
def connected(linked, conversation, client, slack):
    """ada connected her conversation to #pizza from Settings."""
    client.force_login(linked)
    url = reverse("slackbot:connect")
    response = client.post(url, {"conversation": conversation.pk, "channel_id": CHANNEL})
    assert response.status_code == 302
    assert slack.called("conversations.info") == [{"channel": CHANNEL}]
    return SlackChannel.objects.get(conversation=conversation)


def test_a_connected_conversation_s_questions_go_to_its_channel(
    connected, linked, conversation, ask, slack, sweep, interact, django_user_model
):
    grace = django_user_model.objects.create_user(username="grace", password="pw-grace-123")
    link(grace, "U0GRACE")
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="participant"
    )
    question = ask(linked, conversation)
    sweep()
    [post] = slack.called("chat.postMessage")
    assert post["channel"] == CHANNEL  # not ada's nor grace's direct messages
    message = SlackMessage.objects.get()
    assert (message.channel, message.shared) == (CHANNEL, True)

    interact(click(question, "option:2", f"{question.pk}:2", user="U0GRACE"))

    question.refresh_from_db()
    assert (question.answered_by, question.answered_via, question.answer_text) == (
        grace,
        "slack",
        "Funghi",
    )
    sweep()
    [update] = slack.called("chat.update")
    assert (update["channel"], update["text"]) == (CHANNEL, "Answered by grace in Slack.")


def test_someone_in_the_channel_who_may_not_answer_is_refused(
    connected, linked, conversation, ask, slack, interact, other_user
):
    link(other_user, "U0MALLORY")
    question = ask(linked, conversation)
    interact(click(question, "option:0", f"{question.pk}:0", user="U0MALLORY"))
    question.refresh_from_db()
    assert question.status == QuestionStatus.PENDING
    [told] = slack.called("chat.postEphemeral")
    assert told["user"] == "U0MALLORY"
    assert SlackRefusal.objects.get().reason == RefusalReason.NOT_MEMBER


def test_a_channel_the_bot_is_not_in_is_refused(linked, conversation, client, slack):
    slack.outside.add(CHANNEL)
    client.force_login(linked)
    url = reverse("slackbot:connect")
    response = client.post(url, {"conversation": conversation.pk, "channel_id": CHANNEL})
    assert response.status_code == 422
    assert "invite it there first" in response.content.decode()
    assert not SlackChannel.objects.exists()


def test_only_the_owner_connects_a_conversation(
    linked, conversation, client, slack, django_user_model
):
    grace = django_user_model.objects.create_user(username="grace", password="pw-grace-123")
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="participant"
    )
    client.force_login(grace)
    url = reverse("slackbot:connect")
    response = client.post(url, {"conversation": conversation.pk, "channel_id": CHANNEL})
    assert response.status_code == 422
    assert not SlackChannel.objects.exists()


def test_a_disconnected_conversation_s_questions_go_to_direct_messages_again(
    connected, linked, conversation, ask, client, slack, sweep
):
    page = client.get(reverse("accounts:preferences")).content.decode()
    assert f"posts to {CHANNEL}" in page
    url = reverse("slackbot:disconnect", args=[conversation.pk])
    assert client.post(url).status_code == 302
    ask(linked, conversation)
    sweep()
    [post] = slack.called("chat.postMessage")
    assert post["channel"] == "U0ADA"
