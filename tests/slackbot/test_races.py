"""A browser answer and a Slack click at the same moment: exactly one answers, and the other
is told (the browser's with QuestionAlreadyResolved, Slack's ephemerally). Also run on
PostgreSQL (make test-postgres)."""

import threading

import pytest
from django.db import connection

from chat.models import Role
from questions import resolving
from questions.errors import QuestionAlreadyResolved
from questions.payloads import Answer
from slackbot import interactions
from tests.slackbot.conftest import click

pytestmark = pytest.mark.postgres


@pytest.mark.django_db(transaction=True)
def test_a_browser_answer_racing_a_slack_click_answers_once(linked, conversation, ask, slack):
    question = ask(linked, conversation)
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def browser() -> None:
        try:
            barrier.wait()
            resolving.answer_question(
                user=linked,
                conversation_id=conversation.pk,
                tool_call_id=question.tool_call_id,
                answers=[Answer(labels=["Funghi"])],
            )
            outcomes["browser"] = "won"
        except QuestionAlreadyResolved:
            outcomes["browser"] = "already answered"
        finally:
            connection.close()

    def slack_click() -> None:
        try:
            barrier.wait()
            interactions.handle(click(question, "option:1", f"{question.pk}:1"))
            told = slack.called("chat.postEphemeral")
            outcomes["slack"] = told[0]["text"] if told else "won"
        finally:
            connection.close()

    threads = [threading.Thread(target=browser), threading.Thread(target=slack_click)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    question.refresh_from_db()
    if outcomes["browser"] == "won":
        assert outcomes["slack"] == "Answered by ada in Parley."
        assert (question.answer_text, question.answered_via) == ("Funghi", "browser")
    else:
        assert outcomes == {"browser": "already answered", "slack": "won"}
        assert (question.answer_text, question.answered_via) == ("Pepperoni", "slack")
    answers = conversation.messages.filter(role=Role.USER).exclude(pk=question.message_id)
    assert answers.count() == 2  # "Lunch?" and the one answer
