"""Questions in shared conversations: an unassigned question waits for the owner and every
participant; an assigned one for its assignee alone (count, inbox, notifications, webhooks);
the audit records who assigned and who answered; escalation brings it back to the owner."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from chat import sharing
from chat.errors import NotAllowed
from core import events
from questions import deadlines, notifications
from questions import resolving as questions
from questions.errors import InvalidAnswer
from questions.models import Question
from questions.payloads import Answer
from questions.resolving import NOT_AN_ASSIGNEE
from questions.selectors import pending_questions_for_user
from webhooks.models import Delivery
from webhooks.services import create_webhook

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def vera(django_user_model):
    return django_user_model.objects.create_user(username="vera", password="pw-vera-123")


@pytest.fixture
def asked(conversation, user, bob, vera, model, say, committed):
    """ada's conversation, shared with bob (participant) and vera (viewer), waits for the
    answer to q1."""
    with committed():
        for name, role in (("bob", "participant"), ("vera", "viewer")):
            sharing.share_conversation(
                user=user, conversation_id=conversation.pk, username=name, role=role
            )
    model.asks()
    say(user, conversation)
    return Question.objects.get(conversation=conversation, tool_call_id="q1")


def waiting_keys(user) -> list[str]:
    return [q.key for q in pending_questions_for_user(user=user)]


def assign(by, question, assignee, committed):
    with committed():
        questions.assign_question(
            user=by,
            conversation_id=question.conversation_id,
            tool_call_id=question.tool_call_id,
            assignee_id=assignee.pk if assignee else None,
        )
    question.refresh_from_db()


def test_an_unassigned_question_waits_for_the_owner_and_participants(asked, user, bob, vera):
    assert waiting_keys(user) == [asked.key]
    assert waiting_keys(bob) == [asked.key]
    assert waiting_keys(vera) == []


def test_an_assigned_question_waits_for_its_assignee_alone(asked, user, bob, committed):
    assign(user, asked, bob, committed)
    assert waiting_keys(bob) == [asked.key]
    assert waiting_keys(user) == []
    assert asked.assigned_to == bob
    assert asked.assigned_by == user
    assert asked.assigned_at is not None
    # The row says whom it waits for (its card reads it: tests/questions/test_cards.py).


def test_assigning_back_to_everyone_counts_for_all_again(asked, user, bob, committed):
    assign(user, asked, bob, committed)
    assign(bob, asked, None, committed)
    assert waiting_keys(user) == [asked.key]
    assert asked.assigned_by == bob


def test_a_viewer_may_not_assign_nor_be_assigned(asked, user, vera, committed):
    with pytest.raises(NotAllowed):
        assign(vera, asked, user, committed)
    with pytest.raises(InvalidAnswer) as refused:
        assign(user, asked, vera, committed)
    assert refused.value.message == NOT_AN_ASSIGNEE


def test_a_participant_answers_and_the_audit_names_them(asked, bob, committed):
    with committed():
        questions.answer_question(
            user=bob,
            conversation_id=asked.conversation_id,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    asked.refresh_from_db()
    assert asked.answered_by == bob
    assert asked.reply.author == bob


def test_a_viewer_answering_is_refused_and_nothing_changes(asked, vera):
    with pytest.raises(NotAllowed):
        questions.answer_question(
            user=vera,
            conversation_id=asked.conversation_id,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    asked.refresh_from_db()
    assert asked.is_pending


def test_a_viewer_answering_from_the_page_sees_an_alert(asked, vera):
    client = Client()
    client.force_login(vera)
    response = client.post(
        reverse("questions:answer", args=[asked.conversation_id, "q1"]),
        {"q0": "Funghi"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 403
    assert response.headers["HX-Retarget"] == "#question-q1-alert"
    assert "only read this conversation" in response.text


def test_the_page_shows_assign_to_with_the_owner_and_participants(asked, user):
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat:conversation_detail", args=[asked.conversation_id])).text
    assert "Assign to" in page
    select = page[page.index('name="assignee"') : page.index("</select>", page.index("assignee"))]
    assert ">ada<" in select and ">bob<" in select and ">vera<" not in select


def test_events_name_their_recipients(asked, user, bob, committed):
    published: list[notifications.QuestionEvent] = []

    def record(sender, event, **kwargs):
        published.append(event)

    notifications.question_changed.connect(record)
    try:
        assign(user, asked, bob, committed)
    finally:
        notifications.question_changed.disconnect(record)
    assert [(e.type, e.recipient_ids, e.owner_id) for e in published] == [
        (notifications.ASSIGNED, (bob.pk,), user.pk)
    ]


def test_webhooks_reach_the_recipients_endpoints(
    settings, conversation, user, bob, vera, model, say, committed
):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    hooks = {
        person.username: create_webhook(user=person, url=f"http://127.0.0.1:{port}/h")[0]
        for port, person in enumerate((user, bob, vera), start=9001)
    }
    with committed():
        for name, role in (("bob", "participant"), ("vera", "viewer")):
            sharing.share_conversation(
                user=user, conversation_id=conversation.pk, username=name, role=role
            )
    model.asks()
    say(user, conversation)
    asked = Delivery.objects.filter(event_type="question.asked")
    assert {d.webhook_id for d in asked} == {hooks["ada"].pk, hooks["bob"].pk}
    question = Question.objects.get(conversation=conversation)
    assign(user, question, bob, committed)
    assigned = Delivery.objects.filter(event_type="question.assigned")
    assert [d.webhook_id for d in assigned] == [hooks["bob"].pk]
    assert json.loads(assigned[0].body)["data"]["toolCallId"] == "q1"


def test_removing_the_assignee_gives_the_question_back_to_everyone(asked, user, bob, committed):
    assign(user, asked, bob, committed)
    with committed():
        sharing.remove_member(user=user, conversation_id=asked.conversation_id, member_id=bob.pk)
    asked.refresh_from_db()
    assert asked.assigned_to is None
    assert waiting_keys(user) == [asked.key]


def test_escalation_gives_an_overdue_assigned_question_to_the_owner(
    settings, asked, user, bob, committed, clock, monkeypatch
):
    settings.QUESTION_ESCALATE_AFTER = 60
    assign(user, asked, bob, committed)
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(events, "send", lambda group, event: sent.append((group, event)))
    with committed():
        deadlines.sweep()
    asked.refresh_from_db()
    assert asked.assigned_to == bob  # not due yet
    clock.advance(61)
    with committed():
        deadlines.sweep()
    asked.refresh_from_db()
    assert asked.assigned_to == user
    assert asked.escalated_at is not None
    assert waiting_keys(user) == [asked.key]
    assert waiting_keys(bob) == []
    # The owner's pages hear of it (and notify: a question newly waiting for them).
    assert any(group == events.attention_group(user.pk) for group, _ in sent)


def test_without_the_setting_nothing_escalates(settings, asked, user, bob, committed, clock):
    settings.QUESTION_ESCALATE_AFTER = None
    assign(user, asked, bob, committed)
    clock.advance(10**6)
    with committed():
        deadlines.sweep()
    asked.refresh_from_db()
    assert asked.assigned_to == bob
