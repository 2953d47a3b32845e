"""Questions by e-mail (spec 6.2, "Answering from anywhere"): the mail's two parts, the
signed single-use option links that need no login, confirming by POST only, and the outbox
that sends it without ever holding up a turn."""

import re
import smtplib
from html import unescape

import pytest
from django.core import mail, signing
from django.core.mail.backends import locmem
from django.test import Client
from django.utils import timezone

from accounts.models import Preferences
from chat import services
from chat.models import Message, Role
from questions import resolving as questions
from questions.models import Question, QuestionStatus
from questions.payloads import Answer
from reach import links
from reach.models import AnswerLink
from tests.api.tool_requests import ask_approvals
from tests.reach.conftest import PUBLIC_URL
from webhooks.models import Delivery, DeliveryChannel, DeliveryStatus

# Also run on PostgreSQL (make test): links are used up by conditional updates.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

LINK = re.compile(re.escape(PUBLIC_URL) + r"/answer/[^/\s\"<>]+/")


def option_links(message) -> list[str]:
    return LINK.findall(message.body)


def confirm_form(client: Client, url: str):
    """Open the link as a browser does (no session), and read the form's CSRF token."""
    page = client.get(url.removeprefix(PUBLIC_URL))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    return page, token.group(1) if token else ""


def confirm(client: Client, url: str):
    _page, token = confirm_form(client, url)
    return client.post(url.removeprefix(PUBLIC_URL), {"csrfmiddlewaretoken": token})


def test_the_mail_has_both_parts_with_the_question_its_context_and_a_link_per_option(
    mailed_user, conversation, ask, sweep
):
    ask(mailed_user, conversation)
    [row] = Delivery.objects.all()
    assert (row.channel, row.recipient, row.webhook) == (DeliveryChannel.EMAIL, mailed_user, None)
    assert mail.outbox == []  # nothing is sent inside the turn's transaction
    assert sweep() == 1
    [message] = mail.outbox
    assert message.to == ["ada@example.org"]
    assert message.subject == "Parley asks: Pizza"
    text = message.body
    assert "Which pizza?" in text
    assert "I checked the menu of Luigi's." in text  # the agent's words before it
    assert f"{PUBLIC_URL}/c/{conversation.pk}/#question-q1" in text
    urls = option_links(message)
    assert len(urls) == 3
    assert len(set(urls)) == 3
    [(html, mimetype)] = message.alternatives
    assert mimetype == "text/html"
    assert "Which pizza?" in html
    assert "I checked the menu of Luigi&#x27;s." in html  # escaped
    assert [unescape(url) for url in LINK.findall(html)] == urls
    for label in ("Margherita", "Pepperoni", "Funghi"):
        assert label in text and label in html
    assert "Tomato, mozzarella" in html
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert Question.objects.get().status == QuestionStatus.PENDING


def test_opening_a_link_shows_the_answer_and_answers_nothing(mailed_user, conversation, ask, sweep):
    ask(mailed_user, conversation)
    sweep()
    margherita = option_links(mail.outbox[0])[0]
    browser = Client(enforce_csrf_checks=True)  # no session: nobody is logged in
    for _ in range(3):  # a mail scanner, a preview, the person: each only looks
        page, token = confirm_form(browser, margherita)
        assert page.status_code == 200
        html = page.content.decode()
        assert "Which pizza?" in html and "Margherita" in html
        assert "I checked the menu of Luigi&#x27;s." in html
        assert re.search(r"<button[^>]*>Confirm answer</button>", html)
        assert token
    question = Question.objects.get()
    assert question.status == QuestionStatus.PENDING
    assert AnswerLink.objects.filter(used_at__isnull=False).count() == 0


def test_confirming_answers_once_through_the_answering_service(
    mailed_user, conversation, ask, sweep, committed
):
    ask(mailed_user, conversation)
    sweep()
    pepperoni = option_links(mail.outbox[0])[1]
    browser = Client(enforce_csrf_checks=True)
    with committed():
        response = confirm(browser, pepperoni)
    assert response.status_code == 200
    assert "Your answer “Pepperoni” was sent." in response.content.decode()
    question = Question.objects.get()
    assert question.status == QuestionStatus.ANSWERED
    assert (question.answered_via, question.answered_by) == ("email", mailed_user)
    assert question.answers == [{"labels": ["Pepperoni"], "custom": ""}]
    # The answer is the user message the browser's answer inserts, once; the agent went on.
    answers = Message.objects.filter(conversation=conversation, role=Role.USER)
    assert [m.plain_text for m in answers] == ["Lunch?", "Pepperoni"]
    conversation.refresh_from_db()
    assert conversation.agent_state == "idle"

    again = confirm(browser, pepperoni)
    assert again.status_code == 410
    assert "This link has already been used." in again.content.decode()
    looked = browser.get(pepperoni.removeprefix(PUBLIC_URL))
    assert looked.status_code == 410
    assert "This link has already been used." in looked.content.decode()
    other = browser.get(option_links(mail.outbox[0])[0].removeprefix(PUBLIC_URL))
    assert other.status_code == 410
    assert "This question was already answered." in other.content.decode()
    assert Question.objects.get().answers == [{"labels": ["Pepperoni"], "custom": ""}]


def test_a_confirmation_without_the_csrf_token_is_refused(mailed_user, conversation, ask, sweep):
    ask(mailed_user, conversation)
    sweep()
    url = option_links(mail.outbox[0])[0].removeprefix(PUBLIC_URL)
    browser = Client(enforce_csrf_checks=True)
    assert browser.post(url).status_code == 403
    assert Question.objects.get().status == QuestionStatus.PENDING


def test_a_question_answered_elsewhere_says_so_with_410(mailed_user, conversation, ask, sweep):
    ask(mailed_user, conversation)
    sweep()
    url = option_links(mail.outbox[0])[2]
    questions.answer_question(
        user=mailed_user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Margherita"])],
    )
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(url.removeprefix(PUBLIC_URL))
    assert page.status_code == 410
    assert "This question was already answered." in page.content.decode()
    assert "Confirm answer" not in page.content.decode()
    assert Question.objects.get().answered_via == "browser"


def test_a_question_past_its_deadline_says_it_expired(
    settings, mailed_user, conversation, ask, sweep, clock
):
    settings.QUESTION_EXPIRE_AFTER = 60
    ask(mailed_user, conversation)
    sweep()
    url = option_links(mail.outbox[0])[0]
    clock.advance(61)  # the deadline passed; the sweep that expires it has not run yet
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(url.removeprefix(PUBLIC_URL))
    assert page.status_code == 410
    assert "This question expired before it was answered." in page.content.decode()


def test_a_confirmation_that_loses_to_another_answer_uses_nothing(
    mailed_user, conversation, ask, sweep, monkeypatch
):
    """The page was opened while the question waited; by the POST it was answered in the
    browser: the link says so (410), and stays unused."""
    ask(mailed_user, conversation)
    sweep()
    url = option_links(mail.outbox[0])[0]
    browser = Client(enforce_csrf_checks=True)
    _page, token = confirm_form(browser, url)
    questions.answer_question(
        user=mailed_user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
    )
    response = browser.post(url.removeprefix(PUBLIC_URL), {"csrfmiddlewaretoken": token})
    assert response.status_code == 410
    assert "This question was already answered." in response.content.decode()
    assert not AnswerLink.objects.filter(used_at__isnull=False).exists()


def test_two_confirmations_of_one_link_answer_once(mailed_user, conversation, ask, sweep):
    ask(mailed_user, conversation)
    sweep()
    token = option_links(mail.outbox[0])[0].rstrip("/").rsplit("/", 1)[1]
    links.answer_by_link(token=token)
    with pytest.raises(links.LinkUsed):
        links.answer_by_link(token=token)
    assert Message.objects.filter(conversation=conversation, role=Role.USER).count() == 2


@pytest.mark.parametrize(
    ("change", "status", "text"),
    [
        (lambda token: token[:-3] + ("AAA" if token[-3:] != "AAA" else "BBB"), 400, "not valid"),
        (lambda token: "nonsense", 400, "not valid"),
        (
            lambda token: signing.dumps({"l": 999_999, "n": "x"}, salt=links.SALT),
            404,
            "leads to no question",
        ),
    ],
)
def test_a_bad_or_tampered_link_is_a_clear_page(
    mailed_user, conversation, ask, sweep, change, status, text
):
    ask(mailed_user, conversation)
    sweep()
    token = option_links(mail.outbox[0])[0].rstrip("/").rsplit("/", 1)[1]
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(f"/answer/{change(token)}/")
    assert page.status_code == status
    assert text in page.content.decode()
    assert Question.objects.get().status == QuestionStatus.PENDING


def test_a_link_for_another_option_index_cannot_be_forged(mailed_user, conversation, ask, sweep):
    """The signature covers the link's id and its random nonce: another row's id with this
    nonce (or the reverse) leads nowhere."""
    ask(mailed_user, conversation)
    sweep()
    first, second = AnswerLink.objects.order_by("option")[:2]
    forged = signing.dumps({"l": second.pk, "n": first.nonce}, salt=links.SALT)
    assert Client().get(f"/answer/{forged}/").status_code == 404


@pytest.mark.parametrize(
    "arguments",
    [
        {
            "question": "Toppings?",
            "options": [{"label": "Olives"}, {"label": "Basil"}],
            "multiple": True,
        },
        {"question": "What should the note say?", "options": []},
    ],
)
def test_other_questions_link_to_the_conversation(mailed_user, conversation, ask, sweep, arguments):
    ask(mailed_user, conversation, "question", arguments)
    sweep()
    [message] = mail.outbox
    assert option_links(message) == []
    assert f"{PUBLIC_URL}/c/{conversation.pk}/#question-q1" in message.body
    assert "Answer it in Parley" in message.alternatives[0][0]
    assert not AnswerLink.objects.exists()


def test_several_questions_link_to_the_conversation(mailed_user, conversation, ask, sweep):
    two = {
        "questions": [
            {"question": "Size?", "header": "Size", "options": [{"label": "S"}, {"label": "L"}]},
            {
                "question": "Crust?",
                "header": "Crust",
                "options": [{"label": "Thin"}, {"label": "Thick"}],
            },
        ]
    }
    ask(mailed_user, conversation, "ask_user_question", two)
    sweep()
    [message] = mail.outbox
    assert option_links(message) == []
    assert "Size?" in message.body and "Crust?" in message.body


def test_an_approval_is_mailed_with_a_link_to_the_conversation(
    mailed_user, conversation, sweep, dispatched
):
    ask_approvals(conversation.pk)
    sweep()
    [message] = mail.outbox
    assert message.subject == "Parley asks: Allow Write note (notes)?"
    assert option_links(message) == []
    assert f"{PUBLIC_URL}/c/{conversation.pk}/#question-w1" in message.body


def test_a_confirm_action_gets_yes_and_no_links(mailed_user, conversation, ask, sweep, committed):
    ask(mailed_user, conversation, "confirm_action", {"action": "Delete the old notes"})
    sweep()
    _yes, no = option_links(mail.outbox[0])
    with committed():
        response = confirm(Client(enforce_csrf_checks=True), no)
    assert response.status_code == 200
    question = Question.objects.get()
    assert (question.answer_text, question.answered_via) == ("No", "email")


@pytest.mark.parametrize(
    "change",
    [
        lambda user: Preferences.objects.filter(user=user).update(email_questions=False),
        lambda user: type(user).objects.filter(pk=user.pk).update(email=""),
    ],
)
def test_no_mail_without_the_setting_or_an_address(mailed_user, conversation, ask, change):
    change(mailed_user)
    ask(mailed_user, conversation)
    assert not Delivery.objects.exists()


def test_a_question_answered_before_its_mail_went_out_is_not_mailed(
    mailed_user, conversation, ask, sweep
):
    ask(mailed_user, conversation)
    questions.answer_question(
        user=mailed_user,
        conversation_id=conversation.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
    )
    sweep()
    assert mail.outbox == []
    assert Delivery.objects.get().status == DeliveryStatus.SKIPPED


def test_only_the_owner_is_mailed(mailed_user, other_user, ask):
    other_user.email = "mallory@example.org"
    other_user.save()
    Preferences.objects.create(user=other_user, email_questions=True)
    theirs = services.create_conversation(owner=other_user)
    ask(other_user, theirs)
    assert [row.recipient for row in Delivery.objects.all()] == [other_user]


def test_a_mail_server_that_fails_is_retried_with_backoff_and_the_turn_goes_on(
    settings, mailed_user, conversation, ask, sweep, monkeypatch, clock
):
    settings.WEBHOOK_RETRY_SECONDS = 10

    down = [True]
    send_messages = locmem.EmailBackend.send_messages

    def refuse(self, messages):
        if down[0]:
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")
        return send_messages(self, messages)

    monkeypatch.setattr(locmem.EmailBackend, "send_messages", refuse)
    ask(mailed_user, conversation)
    conversation.refresh_from_db()
    assert conversation.agent_state == "awaiting_user"  # the turn asked, whatever mail does
    sweep()
    row = Delivery.objects.get()
    assert (row.status, row.attempts) == (DeliveryStatus.PENDING, 1)
    assert "SMTPServerDisconnected" in row.last_error
    assert row.next_attempt_at > timezone.now()
    assert sweep() == 0  # not due yet
    down[0] = False
    clock.advance(11)
    assert sweep() == 1
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert len(mail.outbox) == 1


def test_the_mail_is_written_in_the_recipients_language(mailed_user, conversation, ask, sweep):
    Preferences.objects.filter(user=mailed_user).update(language="pt-br")
    ask(mailed_user, conversation)
    sweep()
    [message] = mail.outbox
    assert message.subject == "Parley pergunta: Pizza"
    assert "Abrir a conversa" in message.alternatives[0][0]
    url = option_links(message)[0].removeprefix(PUBLIC_URL)
    page = Client().get(url)
    assert "Confirmar resposta" in page.content.decode()


def test_settings_turn_questions_by_email_on(client, user):
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert "Email me questions" in page
    client.post("/settings/", {"theme": "system", "email_questions": "on", "language": "zh-hans"})
    preferences = Preferences.objects.get(user=user)
    assert (preferences.email_questions, preferences.language) == (True, "zh-hans")


@pytest.mark.django_db(transaction=True)
def test_two_confirmations_at_once_answer_once(mailed_user, conversation, ask, sweep):
    """Two POSTs of one link race (a double click, two devices): one answers; the other is
    told the link was used (or, if it got past that check first, that the question was
    answered: the question's own first-wins update). Never two answers."""
    import threading

    from django.db import connection

    ask(mailed_user, conversation)
    sweep()
    token = option_links(mail.outbox[0])[0].rstrip("/").rsplit("/", 1)[1]
    start = threading.Barrier(2)
    outcomes = []

    def confirm_now() -> None:
        start.wait()
        try:
            links.answer_by_link(token=token)
            outcomes.append("answered")
        except (links.LinkUsed, links.QuestionClosed) as refused:
            outcomes.append(type(refused).__name__)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm_now) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["LinkUsed", "answered"] or sorted(outcomes) == [
        "QuestionClosed",
        "answered",
    ]
    assert Message.objects.filter(conversation=conversation, role=Role.USER).count() == 2
    assert Question.objects.get().answered_via == "email"


def test_a_question_assigned_to_a_participant_is_mailed_to_them_alone(
    mailed_user, conversation, ask, sweep, django_user_model
):
    from chat import sharing

    grace = django_user_model.objects.create_user(
        username="grace", password="pw-grace-123", email="grace@example.org"
    )
    Preferences.objects.create(user=grace, email_questions=True)
    sharing.share_conversation(
        user=mailed_user, conversation_id=conversation.pk, username="grace", role="participant"
    )
    ask(mailed_user, conversation)
    sweep()
    # Asked: it waits for the owner and the participant, and both asked for mail.
    assert sorted(address for m in mail.outbox for address in m.to) == [
        "ada@example.org",
        "grace@example.org",
    ]
    mail.outbox.clear()
    question = Question.objects.get()

    def assign(assignee):
        questions.assign_question(
            user=mailed_user,
            conversation_id=conversation.pk,
            tool_call_id=question.tool_call_id,
            assignee_id=assignee.pk,
        )
        sweep()

    assign(mailed_user)  # taken by the owner for themself: nobody is mailed again
    assert mail.outbox == []
    assign(grace)
    [message] = mail.outbox
    assert message.to == ["grace@example.org"]
    _margherita, pepperoni, _funghi = option_links(message)
    assert confirm(Client(), pepperoni).status_code == 200
    question.refresh_from_db()
    assert (question.status, question.answers, question.answered_by, question.answered_via) == (
        QuestionStatus.ANSWERED,
        [{"labels": ["Pepperoni"], "custom": ""}],
        grace,
        "email",
    )


@pytest.mark.parametrize("change", ["removed", "made a viewer"])
def test_a_member_who_can_no_longer_answer_finds_their_link_no_longer_available(
    mailed_user, conversation, ask, sweep, django_user_model, committed, change
):
    from chat import sharing

    grace = django_user_model.objects.create_user(
        username="grace", password="pw-grace-123", email="grace@example.org"
    )
    Preferences.objects.create(user=grace, email_questions=True)
    sharing.share_conversation(
        user=mailed_user, conversation_id=conversation.pk, username="grace", role="participant"
    )
    ask(mailed_user, conversation)
    sweep()
    [message] = [m for m in mail.outbox if m.to == ["grace@example.org"]]
    pepperoni = option_links(message)[1].removeprefix(PUBLIC_URL)
    browser = Client(enforce_csrf_checks=True)
    _page, token = confirm_form(browser, pepperoni)  # opened while she was a participant

    with committed():
        if change == "removed":
            sharing.remove_member(
                user=mailed_user, conversation_id=conversation.pk, member_id=grace.pk
            )
        else:
            sharing.share_conversation(
                user=mailed_user, conversation_id=conversation.pk, username="grace", role="viewer"
            )

    looked = browser.get(pepperoni)
    assert looked.status_code == 410
    html = looked.content.decode()
    assert "This question is no longer available to you." in html
    assert "Which pizza?" not in html and "Confirm answer" not in html
    confirmed = browser.post(pepperoni, {"csrfmiddlewaretoken": token})
    assert confirmed.status_code == 410
    assert "This question is no longer available to you." in confirmed.content.decode()
    question = Question.objects.get()
    assert question.status == QuestionStatus.PENDING
    assert not AnswerLink.objects.filter(used_at__isnull=False).exists()
    # The owner's own links still answer.
    [owners] = [m for m in mail.outbox if m.to == ["ada@example.org"]]
    with committed():
        assert confirm(Client(), option_links(owners)[0]).status_code == 200
    assert Question.objects.get().answered_by == mailed_user


# --- An agent's notification (Claude Code's Notification hook) ---------------------------------

IDLE = {
    "session_id": "92520878-8804-4513-a42c-e39cba79fb6c",
    "cwd": "/work/proj",
    "hook_event_name": "Notification",
    "title": "Claude Code",
    "message": "Claude is waiting for your input",
    "notification_type": "idle_prompt",
}


def notify(client, user, body=IDLE):
    from api.tokens import create_token

    token = create_token(user=user, name="hook")[1]
    response = client.post(
        "/hooks/claude-code/notification",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200


def test_an_agents_notification_is_mailed_with_the_link_to_its_conversation(
    client, mailed_user, sweep, committed
):
    with committed():
        notify(client, mailed_user)
    assert sweep() == 1
    [message] = mail.outbox
    assert message.subject == "Claude Code · proj: Claude is waiting for your input"
    assert "Claude is waiting for your input" in message.body
    conversation = mailed_user.conversations.get()
    assert f"{PUBLIC_URL}/c/{conversation.pk}/" in message.body
    html = message.alternatives[0][0]
    assert "Claude is waiting for your input" in html


def test_a_notification_the_conversation_moved_past_is_not_mailed(
    client, mailed_user, sweep, committed
):
    """A newer message (such as the approval the notice announced, which is mailed itself)
    makes the notice stale: one prompt reaches the person once."""
    from chat.blocks import TextBlock
    from chat.transcript import Transcript

    with committed():
        notify(client, mailed_user)
        conversation = mailed_user.conversations.get()
        with Transcript(conversation) as transcript:
            transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text="Done.")])
    sweep()
    assert mail.outbox == []
    assert Delivery.objects.get().status == DeliveryStatus.SKIPPED


def test_a_notification_about_an_approval_already_waiting_is_not_mailed_again(
    client, mailed_user, sweep, committed
):
    from mcp_server import hooking
    from mcp_server.hook_input import ToolHookInput

    bash = {
        **IDLE,
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": "touch ran"},
    }
    with committed():
        hooking.ask_permission(
            user=mailed_user, agent="claude-code", hook=ToolHookInput.model_validate(bash)
        )
        notify(client, mailed_user, {**IDLE, "message": "Claude needs your permission to use Bash"})
    assert sweep() == 1
    [message] = mail.outbox
    assert message.subject.startswith("Parley asks:")
