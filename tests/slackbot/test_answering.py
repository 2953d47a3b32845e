"""Questions and approvals answered in Slack (issue 53): posted to the linked user as a direct
message through the outbox, answered by a button or a modal through the same services as
every other channel (answeredVia slack, answeredBy the linked user), and the message
rewritten once the question is closed, wherever it was answered."""

import pytest
from django.test import Client
from django.urls import reverse

from chat import sharing
from chat.models import Role
from questions.models import QuestionStatus
from slackbot.models import SlackMessage
from tests.slackbot.conftest import ADA, click, form, link, sign, submission
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def posted_actions(message: dict) -> list[dict]:
    return [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_a_single_choice_answered_by_its_button_answers_as_the_linked_user(
    linked, conversation, ask, slack, sweep, interact
):
    question = ask(
        linked,
        conversation,
        words="I checked <!channel> the *menu* of <https://x.invalid|Luigi's>.",
    )
    sweep()
    [post] = slack.called("chat.postMessage")
    assert post["channel"] == ADA
    texts = [b["text"] for b in post["blocks"] if b["type"] == "section"]
    # The agent's words come as plain text: no mention, link or formatting reaches Slack's markup.
    assert texts[0] == {
        "type": "plain_text",
        "text": "I checked <!channel> the *menu* of <https://x.invalid|Luigi's>.",
        "emoji": False,
    }
    assert "<" not in post["text"]
    buttons = posted_actions(post)
    assert [b["text"]["text"] for b in buttons] == [
        "Margherita",
        "Pepperoni",
        "Funghi",
        "Answer…",
        "Open in Parley",
    ]
    message = SlackMessage.objects.get()
    assert (message.channel, message.recipient) == ("D" + ADA, linked)

    pepperoni = buttons[1]
    response = interact(click(question, pepperoni["action_id"], pepperoni["value"]))

    assert response.status_code == 200
    question.refresh_from_db()
    assert (question.status, question.answered_via, question.answered_by) == (
        QuestionStatus.ANSWERED,
        "slack",
        linked,
    )
    assert question.answer_text == "Pepperoni"
    # The agent resumed with the answer.
    assert (
        conversation.messages.filter(role=Role.ASSISTANT)
        .last()
        .blocks[-1]["text"]
        .startswith("Thanks")
    )
    sweep()
    [update] = slack.called("chat.update")
    assert (update["channel"], update["ts"]) == (message.channel, message.ts)
    assert "Answered by ada in Slack." in update["text"]
    assert [b["text"]["text"] for b in posted_actions(update)] == ["Open in Parley"]
    message.refresh_from_db()
    assert message.closed_at is not None


def test_a_multi_select_is_answered_in_the_modal(linked, conversation, ask, slack, sweep, interact):
    arguments = {
        "question": "Which toppings?",
        "options": [{"label": "Olives"}, {"label": "Basil"}, {"label": "Chili"}],
        "multiple": True,
    }
    question = ask(linked, conversation, arguments=arguments)
    sweep()
    [post] = slack.called("chat.postMessage")
    [answer_button] = [b for b in posted_actions(post) if b["action_id"] == "open"]

    interact(click(question, "open", answer_button["value"]))

    [opened] = slack.called("views.open")
    assert opened["trigger_id"] == "1337.42.abcdef"
    view = opened["view"]
    [choices] = [b for b in view["blocks"] if b["block_id"] == "q0"]
    assert choices["element"]["type"] == "checkboxes"
    values = {
        "q0": {
            "chosen": {
                "type": "checkboxes",
                "selected_options": [{"value": "0"}, {"value": "2"}],
            }
        },
        "q0-custom": {"typed": {"type": "plain_text_input", "value": None}},
    }
    response = interact(submission(question, view["callback_id"], values))

    assert response.status_code == 200
    question.refresh_from_db()
    assert (question.status, question.answered_via) == (QuestionStatus.ANSWERED, "slack")
    assert question.answers == [{"labels": ["Olives", "Chili"], "custom": ""}]


def test_a_free_form_question_is_answered_in_the_modal(
    linked, conversation, ask, slack, sweep, interact
):
    question = ask(linked, conversation, arguments={"question": "What should the note say?"})
    sweep()
    [post] = slack.called("chat.postMessage")
    assert [b["action_id"] for b in posted_actions(post)] == ["open", "open_in_parley"]
    interact(click(question, "open", str(question.pk)))
    [opened] = slack.called("views.open")
    assert [b["block_id"] for b in opened["view"]["blocks"]] == ["q0-custom"]

    values = {"q0-custom": {"typed": {"type": "plain_text_input", "value": "Buy <milk> & eggs"}}}
    interact(submission(question, opened["view"]["callback_id"], values))

    question.refresh_from_db()
    assert question.answer_text == "Buy <milk> & eggs"
    assert question.answered_by == linked


def test_an_answer_that_does_not_fit_is_shown_on_the_modal(
    linked, conversation, ask, slack, sweep, interact
):
    question = ask(linked, conversation, arguments={"question": "What should the note say?"})
    values = {"q0-custom": {"typed": {"type": "plain_text_input", "value": ""}}}
    response = interact(submission(question, "parley_answer", values))

    assert response.json()["response_action"] == "errors"
    question.refresh_from_db()
    assert question.status == QuestionStatus.PENDING


def test_allow_decides_the_approval(linked, conversation, ask_approval, slack, sweep, interact):
    question = ask_approval()
    sweep()
    [post] = slack.called("chat.postMessage")
    assert [b["text"]["text"] for b in posted_actions(post)] == [
        "Allow",
        "Deny",
        "Deny with feedback…",
        "Open in Parley",
    ]
    # The tool's title, with a would-be mention, is plain text.
    assert any("<@U0BOSS>" in b["text"]["text"] for b in post["blocks"] if b["type"] == "section")
    assert all(b["text"]["type"] == "plain_text" for b in post["blocks"] if b["type"] == "section")

    interact(click(question, "allow", str(question.pk)))

    question.refresh_from_db()
    assert (question.status, question.answered_via, question.answered_by) == (
        QuestionStatus.ANSWERED,
        "slack",
        linked,
    )
    assert question.answers["decision"] == "allow"
    sweep()
    [update] = slack.called("chat.update")
    assert "Allowed by ada in Slack." in update["text"]


def test_deny_with_feedback_is_told_to_the_agent(
    linked, conversation, ask_approval, slack, sweep, interact
):
    question = ask_approval()
    interact(click(question, "deny_feedback", str(question.pk)))
    [opened] = slack.called("views.open")
    assert opened["view"]["callback_id"] == "parley_deny"

    values = {"feedback": {"typed": {"type": "plain_text_input", "value": "Not on Fridays."}}}
    response = interact(submission(question, "parley_deny", values))

    assert response.status_code == 200
    question.refresh_from_db()
    assert question.status == QuestionStatus.REJECTED
    assert question.answers == {"decision": "deny", "feedback": "Not on Fridays."}
    assert question.answered_via == "slack"


def test_a_plain_deny_button_denies(linked, conversation, ask_approval, slack, interact):
    question = ask_approval()
    interact(click(question, "deny", str(question.pk)))
    question.refresh_from_db()
    assert (question.status, question.answers) == (QuestionStatus.REJECTED, {"decision": "deny"})


def test_a_question_answered_in_the_browser_first_closes_the_message_and_a_late_click_is_told(
    linked, conversation, ask, slack, sweep, interact, client, committed
):
    question = ask(linked, conversation)
    sweep()
    client.force_login(linked)
    url = reverse("questions:answer", args=[conversation.pk, question.tool_call_id])
    with committed():
        assert client.post(url, {"q0": "Funghi"}).status_code == 302
    question.refresh_from_db()
    assert question.answered_via == "browser"

    interact(click(question, "option:0", f"{question.pk}:0"))

    question.refresh_from_db()
    assert question.answer_text == "Funghi"
    [told] = slack.called("chat.postEphemeral")
    assert told["user"] == ADA
    assert told["text"] == "Answered by ada in Parley."
    sweep()
    [update] = slack.called("chat.update")
    assert "Answered by ada in Parley." in update["text"]


def test_nothing_is_queued_for_slack_while_it_is_not_set_up(linked, conversation, ask, settings):
    settings.SLACK_BOT_TOKEN = ""
    ask(linked, conversation)
    assert not Delivery.objects.filter(channel=DeliveryChannel.SLACK).exists()


def test_a_question_resolved_before_it_is_posted_is_not_posted(
    linked, conversation, ask, slack, sweep, interact, committed
):
    from questions import resolving

    question = ask(linked, conversation)
    with committed():
        resolving.reject_question(
            user=linked, conversation_id=conversation.pk, tool_call_id=question.tool_call_id
        )
    sweep()
    assert slack.called("chat.postMessage") == []
    assert Delivery.objects.get(channel=DeliveryChannel.SLACK).status == DeliveryStatus.SKIPPED


def test_a_modal_slack_does_not_open_is_said(linked, conversation, ask, slack, interact):
    question = ask(linked, conversation, arguments={"question": "What should the note say?"})
    slack.fail("views.open", 500)
    response = interact(click(question, "open", str(question.pk)))
    assert response.status_code == 200
    [told] = slack.called("chat.postEphemeral")
    assert told["text"] == "Slack did not open the form. Try again, or answer in Parley."


def test_an_approval_that_wants_two_people_counts_each_allow(
    linked, conversation, ask_approval, slack, interact, django_user_model
):
    for name in ("grace", "bo"):
        person = django_user_model.objects.create_user(username=name, password=f"pw-{name}-123")
        link(person, f"U0{name.upper()}")
        sharing.share_conversation(
            user=linked, conversation_id=conversation.pk, username=name, role="participant"
        )
    question = ask_approval(needed=2)

    interact(click(question, "allow", str(question.pk), user="U0GRACE"))
    interact(click(question, "allow", str(question.pk), user="U0GRACE"))
    question.refresh_from_db()
    assert question.status == QuestionStatus.PENDING
    counted, again = slack.called("chat.postEphemeral")
    assert counted["text"] == "Counted. This approval waits for more people's decisions."
    assert "already" in again["text"]

    interact(click(question, "allow", str(question.pk), user="U0BO"))
    question.refresh_from_db()
    assert (question.status, question.answered_via) == (QuestionStatus.ANSWERED, "slack")


def test_slack_s_post_needs_no_login_nor_csrf_token(linked, conversation, ask, slack, committed):
    question = ask(linked, conversation)
    body = form(click(question, "option:0", f"{question.pk}:0"))
    with committed():
        response = Client(enforce_csrf_checks=True).post(
            reverse("slackbot:interactions"),
            data=body,
            content_type="application/x-www-form-urlencoded",
            headers=sign(body),
        )
    assert response.status_code == 200
    question.refresh_from_db()
    assert (question.answer_text, question.answered_via) == ("Margherita", "slack")
