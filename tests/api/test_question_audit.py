"""The API records answers as `api`, and as `terminal` when the terminal client says so; it
returns the audit and deadline fields, and lists the user's questions by status."""

import pytest

from chat import services
from chat.engine.providers.base import ToolCallRequest
from chat.models import AgentState
from questions import deadlines
from questions import resolving as questions
from questions.models import QuestionStatus
from questions.payloads import Answer
from tests.factories import set_state
from tests.fakes import PIZZA

pytestmark = pytest.mark.django_db


@pytest.fixture
def ask(model, committed):
    """`ask(owner, conversation)`: the owner's message starts a turn that asks PIZZA as q1
    (before the model's other canned replies), run as after the commit."""

    def ask(owner, conversation):
        model.responses.insert(0, [ToolCallRequest("q1", "question", PIZZA)])
        with committed():
            services.post_user_message(user=owner, conversation_id=conversation.pk, text="Lunch?")

    return ask


@pytest.fixture
def asked(user, conversation, ask):
    ask(user, conversation)
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
    [question] = api.get("/questions", status="answered").json()
    assert (question["answeredBy"], question["answeredVia"]) == ("ada", via)


def test_cancel_records_api(api, asked):
    assert api.post(f"/conversations/{asked.pk}/cancel").status_code == 200
    extra = resolved_question(api, asked.pk)
    assert (extra["questionResolution"], extra["answeredVia"]) == ("rejected", "api")


def test_pending_question_carries_its_deadline(api, settings, user, conversation, ask):
    settings.QUESTION_EXPIRE_AFTER = 600
    ask(user, conversation)
    [question] = api.get("/questions").json()
    assert question["toolCallId"] == "q1"
    assert question["questionResolution"] == "asked"
    assert question["expiresAt"] is not None
    assert question["answeredBy"] is None


def test_questions_status_expired_lists_expired_questions(
    api, settings, user, conversation, ask, clock, committed
):
    settings.QUESTION_EXPIRE_AFTER = 60
    ask(user, conversation)
    assert api.get("/questions", status="expired").json() == []
    clock.advance(61)
    with committed():
        deadlines.sweep()
    [question] = api.get("/questions", status="expired").json()
    assert question["toolCallId"] == "q1"
    assert question["questionResolution"] == "expired"
    assert question["answeredVia"] == "expiry"
    assert api.get("/questions").json() == []


def test_questions_are_listed_by_each_status_and_only_the_users_own(
    api, settings, user, other_user, ask, clock, committed
):
    def conversation(owner, title):
        return services.create_conversation(owner=owner, title=title)

    # Two that will reach their deadline: one expires, one's conversation moved on.
    settings.QUESTION_EXPIRE_AFTER = 60
    expired, cancelled = conversation(user, "expired"), conversation(user, "cancelled")
    ask(user, expired)
    ask(user, cancelled)
    set_state(cancelled.pk, AgentState.IDLE)
    settings.QUESTION_EXPIRE_AFTER = None
    mine = {
        title: conversation(user, title)
        for title in ("pending", "answered", "auto_resolved", "rejected")
    }
    theirs = {title: conversation(other_user, title) for title in ("pending", "answered")}
    for owner, conversations in ((user, mine), (other_user, theirs)):
        for item in conversations.values():
            ask(owner, item)
        with committed():
            questions.answer_question(
                user=owner,
                conversation_id=conversations["answered"].pk,
                tool_call_id="q1",
                answers=[Answer(labels=["Funghi"])],
            )
    with committed():
        services.post_user_message(
            user=user, conversation_id=mine["auto_resolved"].pk, text="Surprise me"
        )
        questions.reject_question(user=user, conversation_id=mine["rejected"].pk, tool_call_id="q1")
    clock.advance(61)
    with committed():
        deadlines.sweep()
    mine.update(expired=expired, cancelled=cancelled)

    resolution = {
        "pending": "asked",
        "answered": "replied",
        "auto_resolved": "replied",
        "rejected": "rejected",
        "expired": "expired",
        "cancelled": "cancelled",
    }
    assert set(resolution) == set(QuestionStatus.values)
    for status in QuestionStatus.values:
        listed = api.get("/questions", status=status)
        assert listed.status_code == 200, status
        assert [(q["conversationId"], q["questionResolution"]) for q in listed.json()] == [
            (mine[status].pk, resolution[status])
        ], status
    # Without a status: the pending ones.
    assert [q["conversationId"] for q in api.get("/questions").json()] == [mine["pending"].pk]


def test_questions_with_an_unknown_status_is_422(api):
    response = api.get("/questions", status="lost")
    assert response.status_code == 422
    body = response.json()
    assert body["message"] == "The request is not valid."
    assert [error["loc"][-1] for error in body["errors"]] == ["status"]


def test_the_openapi_document_declares_the_audit_and_deadline_fields(api):
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    fields = schemas["PendingQuestionOut"]["properties"]
    for name in ("questionResolution", "expiresAt", "answeredBy", "answeredAt", "answeredVia"):
        assert name in fields
