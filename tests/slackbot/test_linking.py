"""Linking a Slack account from Settings: the member ID typed there gets a Confirm button from
the bot, and only that member's click links it; one click in Settings unlinks it."""

from datetime import timedelta

import pytest
from django.urls import reverse

from slackbot.models import SlackLink
from tests.slackbot.conftest import ADA, TEAM, link

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def confirm_click(nonce: str, *, user: str = ADA) -> dict:
    return {
        "type": "block_actions",
        "user": {"id": user, "team_id": TEAM},
        "team": {"id": TEAM},
        "trigger_id": "1.2.3",
        "container": {"type": "message", "channel_id": "D" + user, "message_ts": "1.2"},
        "actions": [{"type": "button", "action_id": "confirm_link", "value": nonce}],
    }


@pytest.fixture
def requested(user, client, slack, sweep, committed):
    """ada typed her member ID in Settings; the bot's message was sent. Its Confirm button."""
    client.force_login(user)
    with committed():
        response = client.post(reverse("slackbot:link"), {"slack_user_id": ADA.lower()})
    assert response.status_code == 302
    sweep()
    [sent] = slack.called("chat.postMessage")
    assert sent["channel"] == ADA
    [confirm] = [e for b in sent["blocks"] if b["type"] == "actions" for e in b["elements"]]
    return confirm


def test_the_member_the_button_was_sent_to_confirms_the_link(user, requested, interact, slack):
    assert not SlackLink.objects.get(user=user).is_confirmed
    interact(confirm_click(requested["value"]))
    link = SlackLink.objects.get(user=user)
    assert (link.is_confirmed, link.slack_user_id, link.team_id) == (True, ADA, TEAM)
    [told] = slack.called("chat.postEphemeral")
    assert told["text"] == "Linked: this Slack account answers as ada in Parley."


def test_another_member_s_click_confirms_nothing(user, requested, interact, slack):
    interact(confirm_click(requested["value"], user="U0EVE"))
    assert not SlackLink.objects.get(user=user).is_confirmed
    assert "expired or was replaced" in slack.called("chat.postEphemeral")[0]["text"]


def test_an_old_request_confirms_nothing(user, requested, interact, clock):
    clock.advance(timedelta(hours=1).total_seconds())
    interact(confirm_click(requested["value"]))
    assert not SlackLink.objects.get(user=user).is_confirmed


def test_a_slack_account_linked_to_someone_else_cannot_be_asked_for(
    user, client, slack, other_user
):
    link(other_user, ADA)
    client.force_login(user)
    response = client.post(reverse("slackbot:link"), {"slack_user_id": ADA})
    assert response.status_code == 422
    assert "already linked to another Parley user" in response.content.decode()
    assert not SlackLink.objects.filter(user=user).exists()


def test_a_member_id_that_is_not_one_is_refused_on_the_settings_page(user, client, slack):
    client.force_login(user)
    response = client.post(reverse("slackbot:link"), {"slack_user_id": "@ada"})
    assert response.status_code == 422
    assert 'aria-invalid="true"' in response.content.decode()


def test_settings_shows_the_link_and_unlinks_in_one_click(user, client, slack):
    link(user)
    client.force_login(user)
    page = client.get(reverse("accounts:preferences")).content.decode()
    assert f"Linked to the Slack member {ADA}" in page
    assert client.post(reverse("slackbot:unlink")).status_code == 302
    assert not SlackLink.objects.exists()
    page = client.get(reverse("accounts:preferences")).content.decode()
    assert "Link Slack account" in page


def test_settings_has_no_slack_section_while_slack_is_not_set_up(user, client):
    client.force_login(user)
    assert "Slack member ID" not in client.get(reverse("accounts:preferences")).content.decode()


def test_link_requests_are_limited(user, client, slack):
    client.force_login(user)
    for _ in range(5):
        assert client.post(reverse("slackbot:link"), {"slack_user_id": ADA}).status_code == 302
    response = client.post(reverse("slackbot:link"), {"slack_user_id": ADA})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "try again in" in response.content.decode()


def test_a_member_id_slack_does_not_know_is_refused(user, client, slack):
    slack.strangers.add("U0NOBODY")
    client.force_login(user)
    response = client.post(reverse("slackbot:link"), {"slack_user_id": "U0NOBODY"})
    assert response.status_code == 422
    assert "Slack knows no person with that member ID" in response.content.decode()
    assert slack.called("users.info") == [{"user": "U0NOBODY"}]
    assert not SlackLink.objects.exists()


def test_a_slack_that_cannot_be_reached_links_nothing(user, client, slack, settings):
    settings.SLACK_API_URL = "http://127.0.0.1:9/api/"
    client.force_login(user)
    response = client.post(reverse("slackbot:link"), {"slack_user_id": ADA})
    assert response.status_code == 422
    assert not SlackLink.objects.exists()
