"""Query budgets of the Slack flows (docs/developers/query-budgets.md): a click that answers a
question, the same whatever the number of the question's Slack messages. Also run on
PostgreSQL."""

import pytest
from django.urls import reverse

from chat import sharing
from chat.engine import dispatch
from questions.models import QuestionStatus
from tests.slackbot.conftest import click, form, link, sign

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# The budget (docs/developers/query-budgets.md), the turn queued: in one's own conversation,
# and in one shared with two participants (whom the answer's event is for, read once; the
# turn's members), each with a Slack message of the question.
SLACK_CLICK = {1: 14, 3: 16}


@pytest.mark.parametrize("people", [1, 3])
def test_a_click_that_answers(
    linked,
    conversation,
    ask,
    slack,
    sweep,
    client,
    monkeypatch,
    people,
    django_user_model,
    django_assert_max_num_queries,
):
    for index in range(people - 1):
        name = f"mate{index}"
        mate = django_user_model.objects.create_user(username=name)
        link(mate, f"U0MATE{index}")
        sharing.share_conversation(
            user=linked, conversation_id=conversation.pk, username=name, role="participant"
        )
    question = ask(linked, conversation)
    sweep()
    assert len(slack.called("chat.postMessage")) == people
    monkeypatch.setattr(dispatch, "start", lambda conversation_id: None)  # a worker's turn
    body = form(click(question, "option:1", f"{question.pk}:1"))
    with django_assert_max_num_queries(SLACK_CLICK[people]):
        response = client.post(
            reverse("slackbot:interactions"),
            data=body,
            content_type="application/x-www-form-urlencoded",
            headers=sign(body),
        )
    assert response.status_code == 200
    question.refresh_from_db()
    assert question.status == QuestionStatus.ANSWERED
