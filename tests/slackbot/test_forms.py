"""A running tool's form (an elicitation) answered in Slack: "Answer…" opens it as a modal,
each field as Slack's nearest input; its submission accepts the form through
questions.resolving, as the page does; "Decline" declines it."""

import pytest

from questions.models import QuestionStatus
from tests.slackbot.conftest import click, submission

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_a_tool_s_form_is_answered_in_the_modal(linked, ask_form, slack, sweep, interact):
    question = ask_form()
    sweep()
    [post] = slack.called("chat.postMessage")
    actions = [e for b in post["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [e["action_id"] for e in actions] == ["open", "decline", "open_in_parley"]

    interact(click(question, "open", str(question.pk)))
    [opened] = slack.called("views.open")
    view = opened["view"]
    assert view["callback_id"] == "parley_form"
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert [(b["label"]["text"], b["element"]["type"], b["optional"]) for b in inputs] == [
        ("Note name", "plain_text_input", False),
        ("Priority", "number_input", True),
        ("Pinned", "checkboxes", True),
        ("colour", "static_select", True),
    ]
    values = {
        "f0": {"value": {"type": "plain_text_input", "value": "groceries"}},
        "f1": {"value": {"type": "number_input", "value": "3"}},
        "f2": {"value": {"type": "checkboxes", "selected_options": [{"value": "true"}]}},
        "f3": {"value": {"type": "static_select", "selected_option": {"value": "green"}}},
    }
    response = interact(submission(question, "parley_form", values))

    assert response.status_code == 200
    question.refresh_from_db()
    assert (question.status, question.answered_via, question.answered_by) == (
        QuestionStatus.ANSWERED,
        "slack",
        linked,
    )
    assert question.answers == {
        "action": "accept",
        "content": {"name": "groceries", "priority": 3, "pinned": True, "colour": "green"},
    }


def test_a_form_the_tool_would_refuse_is_shown_on_the_modal(linked, ask_form, slack, interact):
    question = ask_form()
    values = {"f0": {"value": {"type": "plain_text_input", "value": "far too long a name"}}}
    response = interact(submission(question, "parley_form", values))
    assert response.json()["response_action"] == "errors"
    question.refresh_from_db()
    assert question.status == QuestionStatus.PENDING


def test_decline_declines_the_form(linked, ask_form, slack, interact):
    question = ask_form()
    interact(click(question, "decline", str(question.pk)))
    question.refresh_from_db()
    assert (question.status, question.answers) == (QuestionStatus.REJECTED, {"action": "decline"})
