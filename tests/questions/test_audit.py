"""Who resolved a question, when and through which channel (spec 6.1, "Audit")."""

from datetime import datetime

import pytest
from django.urls import reverse

from chat.blocks import parse_blocks
from chat.models import Role
from questions import resolving as questions
from questions.payloads import Answer, QuestionPayload, payload_of

pytestmark = pytest.mark.django_db


def stored_question(conversation) -> dict:
    for message in conversation.messages.filter(role=Role.ASSISTANT).order_by("-order"):
        for block in message.blocks:
            if block.get("action_type") == "question_request":
                return block["extra"]
    raise AssertionError("no question block")


@pytest.fixture
def asked(user, conversation, model, say):
    model.asks()
    say(user, conversation)
    return conversation


def test_answering_in_the_browser_records_the_user_the_time_and_browser(client, user, asked):
    client.force_login(user)
    client.post(reverse("questions:answer", args=[asked.pk, "q1"]), {"q0": "Funghi"})
    extra = stored_question(asked)
    assert extra["answeredBy"] == "ada"
    assert extra["answeredVia"] == "browser"
    assert datetime.fromisoformat(extra["answeredAt"]).tzinfo is not None


def test_rejecting_in_the_browser_records_browser(client, user, asked):
    client.force_login(user)
    client.post(reverse("questions:reject", args=[asked.pk, "q1"]))
    extra = stored_question(asked)
    assert (extra["questionResolution"], extra["answeredVia"]) == ("rejected", "browser")


def test_an_ordinary_message_records_auto_resolve(user, asked, say):
    say(user, asked, "Funghi, please")
    extra = stored_question(asked)
    assert (extra["answeredBy"], extra["answeredVia"]) == ("ada", "auto-resolve")


def test_the_block_shows_who_answered_and_how(client, user, asked):
    questions.answer_question(
        user=user,
        conversation_id=asked.pk,
        tool_call_id="q1",
        answers=[Answer(labels=["Funghi"])],
        via="browser",
    )
    client.force_login(user)
    html = client.get(reverse("chat:conversation_detail", args=[asked.pk])).content.decode()
    assert "Answered by ada" in html
    assert "via browser" in html


def test_blocks_stored_before_the_audit_still_read_and_render(client, user, asked):
    message = next(
        m for m in asked.messages.filter(role=Role.ASSISTANT) if "action" in str(m.blocks)
    )
    payload = next(p for b in parse_blocks(message.blocks) if (p := payload_of(b)))
    old = payload.model_dump(mode="json", exclude={"expires_at", "answered_by"})
    old = {k: v for k, v in old.items() if v is not None}
    assert QuestionPayload.model_validate(old).answered_by is None
    client.force_login(user)
    assert client.get(reverse("chat:conversation_detail", args=[asked.pk])).status_code == 200
