import pytest
from django.urls import reverse

from chat.models import AgentState, Role
from questions.answers import NOT_AN_OPTION, TOO_MANY_ANSWERS
from questions.errors import QuestionAlreadyResolved
from questions.payloads import payload_of
from questions.selectors import pending_question

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def asked(client, user, conversation, model, say):
    client.force_login(user)
    model.asks()
    say(user, conversation)
    return conversation


def answer_url(conversation, call="q1"):
    return reverse("questions:answer", args=[conversation.pk, call])


def reject_url(conversation, call="q1"):
    return reverse("questions:reject", args=[conversation.pk, call])


def test_the_pending_question_renders_its_controls_escaped(client, asked, model):
    html = client.get(reverse("chat:conversation_detail", args=[asked.pk])).content.decode()
    assert 'role="group" aria-label="Pizza"' in html
    assert 'name="q0" value="Margherita"' in html
    assert "Tomato, mozzarella" in html
    assert '<label class="custom-label" for="custom-q1-0">Your answer</label>' in html
    assert ">Submit</button>" in html
    assert ">Reject</button>" in html
    assert "Used the tool question" not in html  # the block replaces the raw tool call
    assert "Sending a message answers the question." in html


def test_answering_over_htmx_is_204_and_a_second_answer_is_409(client, asked, committed):
    with committed():
        response = client.post(answer_url(asked), {"q0": "Funghi"}, headers=HTMX)
    assert response.status_code == 204
    asked.refresh_from_db()
    assert asked.agent_state == AgentState.IDLE
    again = client.post(answer_url(asked), {"q0": "Funghi"}, headers=HTMX)
    assert again.status_code == 409
    # Shown in the block's alert, whatever the form asked to swap.
    assert (again["HX-Retarget"], again["HX-Reswap"]) == ("#question-q1-alert", "innerHTML")
    assert again.content.decode() == str(QuestionAlreadyResolved.default_message)
    assert asked.messages.filter(role=Role.USER).count() == 2


def test_an_invalid_answer_is_422_with_a_reason(client, asked):
    response = client.post(answer_url(asked), {"q0": "Hawaiian"}, headers=HTMX)
    assert response.status_code == 422
    assert response.content.decode() == str(NOT_AN_OPTION)


def test_typed_answer_and_plain_form_post(client, asked, committed):
    with committed():
        response = client.post(answer_url(asked), {"q0-custom": "Calzone"})
    assert response["Location"] == reverse("chat:conversation_detail", args=[asked.pk])
    html = client.get(response["Location"]).content.decode()
    block = html.split('id="question-q1"')[1].split('role="alert"')[0]
    # The answer shows once, under its question, marked as typed; the inserted message
    # (the contract's, still in the data) is not shown a second time.
    assert '<span class="answer-typed-mark">typed</span> <p>Calzone</p>' in block
    assert html.count("Calzone") == 2  # the block, and the agent's "Thanks: Calzone"
    assert "Thanks: Calzone" in html
    assert 'name="q0"' not in html  # no inputs left once resolved


def test_reject_shows_rejected(client, asked):
    assert client.post(reject_url(asked), headers=HTMX).status_code == 204
    html = client.get(reverse("chat:conversation_detail", args=[asked.pk])).content.decode()
    assert '<p class="question-rejected">Rejected</p>' in html


def test_another_user_gets_404_and_changes_nothing(client, asked, other_user):
    client.force_login(other_user)
    assert client.post(answer_url(asked), {"q0": "Funghi"}).status_code == 404
    assert client.post(reject_url(asked)).status_code == 404
    asked.refresh_from_db()
    assert asked.agent_state == AgentState.AWAITING_USER


def test_tool_provided_text_is_escaped(client, user, conversation, model, say):
    client.force_login(user)
    model.asks(
        arguments={
            "header": "<i>x</i>",
            "question": "<script>alert(1)</script>?",
            "options": [{"label": "<b>A</b>", "description": "<img src=x>"}],
        }
    )
    say(user, conversation, "go")
    html = client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;?" in html
    assert "&lt;b&gt;A&lt;/b&gt;" in html
    assert "<img src=x>" not in html


TWO_QUESTIONS = {
    "questions": [
        {"question": "Base?", "header": "Base", "options": [{"label": "Thin"}, {"label": "Deep"}]},
        {
            "question": "Extras?",
            "header": "Extras",
            "options": [{"label": "Olives"}, {"label": "Basil"}],
            "multiSelect": True,
        },
    ]
}


def test_a_form_answers_several_questions_without_saying_how_many(
    client, user, conversation, model, say
):
    client.force_login(user)
    model.asks("ask_user_question", TWO_QUESTIONS)
    say(user, conversation)
    fields = {"q0": "Deep", "q1": ["Olives", "Basil"], "q1-custom": "extra cheese"}
    response = client.post(answer_url(conversation), fields, headers=HTMX)
    assert response.status_code == 204
    [message] = conversation.messages.filter(role=Role.USER, order__gt=0)
    answered = next(
        p for b in conversation.messages.get(order=1).parsed_blocks if (p := payload_of(b))
    )
    assert [a.model_dump() for a in answered.answers] == [
        {"labels": ["Deep"], "custom": ""},
        {"labels": ["Olives", "Basil"], "custom": "extra cheese"},
    ]
    assert message.parsed_blocks[0].text == "Base: Deep\nExtras: Olives, Basil, extra cheese"


def test_a_question_left_unanswered_or_an_answer_too_many_is_refused(
    client, user, conversation, model, say
):
    client.force_login(user)
    model.asks("ask_user_question", TWO_QUESTIONS)
    say(user, conversation)
    only_first = client.post(answer_url(conversation), {"q0": "Deep"}, headers=HTMX)
    assert only_first.status_code == 422
    too_many = client.post(
        answer_url(conversation), {"q0": "Deep", "q1": "Basil", "q2": "x"}, headers=HTMX
    )
    assert (too_many.status_code, too_many.content.decode()) == (422, str(TOO_MANY_ANSWERS))
    conversation.refresh_from_db()
    assert pending_question(conversation) is not None
