"""The built-in scripted agent speaks after an answer as a person would read it: the answers,
not the JSON the model receives; and a question that expired gets words of its own, never the
instruction meant for the model."""

from datetime import timedelta

import pytest
from django.utils import timezone

from chat.blocks import TextBlock, parse_blocks
from chat.models import Role
from questions import resolving as questions
from questions.answers import EXPIRED_RESULT
from questions.models import Question
from questions.payloads import Answer

pytestmark = pytest.mark.django_db


def last_reply(conversation) -> str:
    message = conversation.messages.filter(role=Role.ASSISTANT).order_by("-order").first()
    return "".join(b.text for b in parse_blocks(message.blocks) if isinstance(b, TextBlock))


def answer(user, conversation, *answers: Answer) -> None:
    question = Question.objects.get(conversation=conversation, status="pending")
    questions.answer_question(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id=question.tool_call_id,
        answers=list(answers),
    )


def test_the_answers_of_several_questions_are_spoken(conversation, user, post, committed):
    post(user, conversation, "Run the setup survey")
    with committed():
        answer(
            user, conversation, Answer(labels=["PostgreSQL"]), Answer(labels=["Search", "Export"])
        )
    assert last_reply(conversation) == "Setting up with **PostgreSQL; Search, Export**."


def test_a_confirmation_is_answered_yes_or_no(conversation, user, post, committed):
    post(user, conversation, "Delete the unused test files (confirm first)")
    with committed():
        answer(user, conversation, Answer(labels=["Yes"]))
    assert last_reply(conversation) == "You answered **yes**. Done as you said."


def test_an_expired_question_gets_the_agents_own_words(conversation, user, post, committed):
    post(user, conversation, "Delete the unused test files (confirm first)")
    question = Question.objects.get(conversation=conversation)
    Question.objects.filter(pk=question.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with committed():
        assert questions.expire_question(question_id=question.pk)
    reply = last_reply(conversation)
    assert reply == "No answer came, so I left the files as they are."
    assert EXPIRED_RESULT not in reply


def test_several_chosen_toppings_are_said_as_a_list(conversation, user, post, committed):
    """Not "Olives Onions" run together in one paragraph: one list item each."""
    from chat.markdown import render_markdown

    post(user, conversation, "Pick several toppings")
    with committed():
        answer(user, conversation, Answer(labels=["Olives", "Onions"]))
    reply = last_reply(conversation)
    assert reply == "Adding these toppings:\n\n- Olives\n- Onions"
    assert "<li>Olives</li>" in render_markdown(reply)


def test_a_notes_server_out_of_reach_ends_the_turn_with_words_of_its_own(conversation, user, post):
    """Without the notes server (no MCP_CONFIG) the agent says so once and stops: it neither
    lists the error as "your notes" nor goes on to write a note."""
    post(user, conversation, "Save a note")
    replies = [
        "".join(b.text for b in parse_blocks(m.blocks) if isinstance(b, TextBlock))
        for m in conversation.messages.filter(role=Role.ASSISTANT).order_by("order")
    ]
    assert replies[-1].startswith("I cannot reach the notes server")
    assert not any("Your notes now" in reply for reply in replies)
