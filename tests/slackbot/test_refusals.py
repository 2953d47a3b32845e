"""What Slack sends that answers nothing: a request Slack did not sign (unsigned, badly
signed, stale, replayed) is refused with 401 before anything is read; a click by a Slack user
who is not linked, or whose Parley user is a viewer or not a member, is told why, ephemerally,
answers nothing, and is kept in the audit of refusals."""

import time

import pytest
from django.urls import reverse

from chat import sharing
from questions.models import QuestionStatus
from slackbot import verify
from slackbot.models import RefusalReason, SlackRefusal
from tests.slackbot.conftest import ADA, click, form, link, sign, submission

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def question(linked, conversation, ask, slack):
    return ask(linked, conversation)


def pending(question) -> bool:
    question.refresh_from_db()
    return question.status == QuestionStatus.PENDING


def test_an_unsigned_interaction_is_refused(question, interact, slack):
    response = interact(click(question, "option:0", f"{question.pk}:0"), headers={})
    assert response.status_code == 401
    assert pending(question)
    assert slack.calls == []


def test_a_badly_signed_interaction_is_refused(question, interact):
    body = form(click(question, "option:0", f"{question.pk}:0"))
    headers = sign(body, secret="not-the-signing-secret")
    assert interact({}, body=body, headers=headers).status_code == 401
    # Signed for another body: the payload was changed on the way.
    tampered = form(click(question, "option:1", f"{question.pk}:1"))
    assert interact({}, body=tampered, headers=sign(body)).status_code == 401
    assert pending(question)


def test_a_stale_interaction_is_refused(question, interact):
    body = form(click(question, "option:0", f"{question.pk}:0"))
    headers = sign(body, timestamp=int(time.time()) - 6 * 60)
    assert interact({}, body=body, headers=headers).status_code == 401
    assert pending(question)


def test_a_replayed_interaction_is_refused(question, interact, slack):
    body = form(click(question, "open", str(question.pk)))
    headers = sign(body)
    assert interact({}, body=body, headers=headers).status_code == 200
    assert interact({}, body=body, headers=headers).status_code == 401
    assert len(slack.called("views.open")) == 1


def test_a_click_by_a_slack_user_who_is_not_linked_answers_nothing(question, interact, slack):
    response = interact(click(question, "option:0", f"{question.pk}:0", user="U0EVE"))

    assert response.status_code == 200
    assert pending(question)
    [told] = slack.called("chat.postEphemeral")
    assert told["user"] == "U0EVE"
    assert "Link your Slack account" in told["text"]
    refusal = SlackRefusal.objects.get()
    assert (refusal.slack_user_id, refusal.user, refusal.question, refusal.reason) == (
        "U0EVE",
        None,
        question,
        RefusalReason.UNLINKED,
    )


def test_a_viewers_click_answers_nothing(
    question, linked, conversation, interact, slack, django_user_model
):
    grace = django_user_model.objects.create_user(username="grace", password="pw-grace-123")
    link(grace, "U0GRACE")
    sharing.share_conversation(
        user=linked, conversation_id=conversation.pk, username="grace", role="viewer"
    )

    interact(click(question, "option:0", f"{question.pk}:0", user="U0GRACE"))
    interact(click(question, "open", str(question.pk), user="U0GRACE"))

    assert pending(question)
    assert slack.called("views.open") == []
    assert [t["user"] for t in slack.called("chat.postEphemeral")] == ["U0GRACE", "U0GRACE"]
    assert "You may not answer" in slack.called("chat.postEphemeral")[0]["text"]
    assert (
        list(SlackRefusal.objects.values_list("user__username", "reason"))
        == [("grace", RefusalReason.VIEWER)] * 2
    )


def test_a_strangers_click_answers_nothing(question, interact, slack, other_user):
    link(other_user, "U0MALLORY")
    interact(click(question, "option:0", f"{question.pk}:0", user="U0MALLORY"))
    assert pending(question)
    assert SlackRefusal.objects.get().reason == RefusalReason.NOT_MEMBER


def test_a_modal_submitted_by_someone_who_may_not_answer_answers_nothing(
    question, interact, other_user
):
    link(other_user, "U0MALLORY")
    values = {"q0": {"chosen": {"type": "radio_buttons", "selected_option": {"value": "0"}}}}
    response = interact(submission(question, "parley_answer", values, user="U0MALLORY"))
    assert response.json()["response_action"] == "update"
    assert pending(question)


def test_a_click_after_unlinking_answers_nothing(question, linked, client, interact, slack):
    client.force_login(linked)
    assert client.post(reverse("slackbot:unlink")).status_code == 302
    interact(click(question, "option:0", f"{question.pk}:0", user=ADA))
    assert pending(question)
    assert SlackRefusal.objects.get().reason == RefusalReason.UNLINKED


def test_a_signed_interaction_is_refused_while_replays_cannot_be_told(
    question, interact, monkeypatch
):
    def unreachable(*args, **kwargs):
        raise ConnectionError("the cache is down")

    monkeypatch.setattr(verify.cache, "add", unreachable)
    response = interact(click(question, "option:0", f"{question.pk}:0"))
    assert response.status_code == 401
    assert pending(question)
