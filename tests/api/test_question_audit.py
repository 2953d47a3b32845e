"""The API records answers as `api`, and as `terminal` when the terminal client says so; it
returns the audit and deadline fields, and lists expired questions."""

import pytest

from chat import services
from questions import deadlines

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asked(user, conversation, model):
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    return conversation


def resolved_question(api, conversation_id) -> dict:
    messages = api.get(f"/conversations/{conversation_id}").json()["messages"]
    [extra] = [
        b["extra"]
        for m in messages
        for b in m["blocks"]
        if b.get("action_type") == "question_request"
    ]
    return extra


@pytest.mark.parametrize(
    ("headers", "via"), [({}, "api"), ({"X-Parley-Client": "terminal"}, "terminal")]
)
def test_respond_records_the_channel(api, asked, headers, via):
    response = api.post(
        f"/conversations/{asked.pk}/respond", {"answers": {"Which pizza?": "Funghi"}}, **headers
    )
    assert response.status_code == 200
    extra = resolved_question(api, asked.pk)
    assert (extra["answeredBy"], extra["answeredVia"]) == ("ada", via)


def test_cancel_records_api(api, asked):
    assert api.post(f"/conversations/{asked.pk}/cancel").status_code == 200
    extra = resolved_question(api, asked.pk)
    assert (extra["questionResolution"], extra["answeredVia"]) == ("rejected", "api")


def test_pending_question_carries_its_deadline(api, settings, user, conversation, model):
    settings.QUESTION_EXPIRE_AFTER = 600
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    [question] = api.get("/questions").json()
    assert question["toolCallId"] == "q1"
    assert question["questionResolution"] == "asked"
    assert question["expiresAt"] is not None
    assert question["answeredBy"] is None


def test_questions_status_expired_lists_expired_questions(
    api, settings, user, conversation, model, clock
):
    settings.QUESTION_EXPIRE_AFTER = 60
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    assert api.get("/questions", status="expired").json() == []
    clock.advance(61)
    deadlines.sweep()
    [question] = api.get("/questions", status="expired").json()
    assert question["toolCallId"] == "q1"
    assert question["questionResolution"] == "expired"
    assert question["answeredVia"] == "expiry"
    assert api.get("/questions").json() == []


def test_questions_with_an_unknown_status_is_422(api):
    response = api.get("/questions", status="lost")
    assert response.status_code == 422
    assert response.json()["message"] == "status must be pending or expired."


def test_the_openapi_document_declares_the_audit_and_deadline_fields(api):
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    fields = schemas["PendingQuestionOut"]["properties"]
    for name in ("questionResolution", "expiresAt", "answeredBy", "answeredAt", "answeredVia"):
        assert name in fields
