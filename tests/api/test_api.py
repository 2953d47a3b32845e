import pytest
from django.core.management import call_command
from django.test import Client

from api.models import ApiToken
from api.tokens import digest
from chat import services
from chat.models import AgentState, Conversation
from questions import answers
from questions.errors import QuestionAlreadyResolved

# Also run on PostgreSQL (make test): the API's listings and JSON as each backend returns them.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PIZZA = "Which pizza?"


def test_every_endpoint_needs_a_session_or_a_token(client, conversation):
    for path in ["/conversations", f"/conversations/{conversation.pk}", "/questions"]:
        response = client.get(f"/api/v1{path}")
        assert response.status_code == 401
        assert "Bearer" in response.json()["message"]
    bad = client.get("/api/v1/conversations", headers={"Authorization": "Bearer parley_nope"})
    assert bad.status_code == 401


def test_a_session_also_works(client, user, conversation):
    client.force_login(user)
    assert [c["id"] for c in client.get("/api/v1/conversations").json()] == [conversation.pk]


def test_create_list_and_get(api):
    created = api.post("/conversations", {"title": "From the API"})
    assert created.status_code == 201
    conversation_id = created.json()["id"]
    assert [c["title"] for c in api.get("/conversations").json()] == ["From the API"]
    detail = api.get(f"/conversations/{conversation_id}").json()
    assert (detail["state"], detail["messages"], detail["pendingQuestion"]) == ("idle", [], None)


def test_anything_not_yours_is_404(api, other_user):
    theirs = services.create_conversation(owner=other_user, title="theirs")
    assert api.get(f"/conversations/{theirs.pk}").status_code == 404
    for action in ["messages", "respond", "cancel"]:
        response = api.post(f"/conversations/{theirs.pk}/{action}", {"content": "x", "answers": {}})
        assert response.status_code == 404, action
        assert response.json() == {"message": "That conversation does not exist."}
    assert theirs.messages.count() == 0


# `wait` answers once the turn that the request's own commit starts has run: that commit
# must really happen during the request.
@pytest.mark.django_db(transaction=True)
def test_message_needs_input_respond_completes(api, conversation, model):
    model.asks(
        arguments={"question": PIZZA, "options": [{"label": "Funghi"}, {"label": "Pepperoni"}]}
    )
    result = api.post(
        f"/conversations/{conversation.pk}/messages", {"content": "Lunch?", "wait": 5}
    ).json()
    assert result["status"] == "needs_input"
    pending = result["pendingQuestion"]
    assert pending["toolCallId"] == "q1"
    assert pending["questions"][0]["options"] == [
        {"label": "Funghi", "description": ""},
        {"label": "Pepperoni", "description": ""},
    ]
    assert (pending["question"], pending["options"]) == (PIZZA, ["Funghi", "Pepperoni"])
    assert [q["toolCallId"] for q in api.get("/questions", status="pending").json()] == ["q1"]

    done = api.post(
        f"/conversations/{conversation.pk}/respond", {"answers": {PIZZA: "Funghi"}, "wait": 5}
    )
    assert done.status_code == 200
    body = done.json()
    assert body["status"] == "complete"
    assert body["response"] == "Thanks: Funghi"
    assert body["pendingQuestion"] is None
    assert api.get("/questions").json() == []

    again = api.post(f"/conversations/{conversation.pk}/respond", {"answers": {PIZZA: "Funghi"}})
    assert again.status_code == 409
    assert again.json() == {"message": str(QuestionAlreadyResolved.default_message)}


def test_posting_a_message_while_pending_answers_it(api, conversation, model, committed):
    model.asks()
    with committed():
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "Lunch?"})
    with committed():
        sent = api.post(f"/conversations/{conversation.pk}/messages", {"content": "Surprise me"})
    assert sent.status_code == 200
    detail = api.get(f"/conversations/{conversation.pk}").json()
    assert (detail["state"], detail["pendingQuestion"]) == ("idle", None)
    assert detail["messages"][-1]["text"] == "Thanks: Surprise me"


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"Which pizza?": "Hawaiian"}, answers.OPTIONS_ONLY),
        ({}, answers.MISSING_ANSWER % {"text": "Which pizza?"}),
        (
            {"Which pizza?": "Funghi", "Other?": "x"},
            answers.NO_SUCH_QUESTION % {"text": "Other?"},
        ),
        ({"Which pizza?": ["Funghi", "Pepperoni"]}, answers.ONE_CHOICE),
    ],
)
def test_invalid_answers_are_422(api, conversation, model, committed, answers, message):
    model.asks(
        arguments={
            "question": PIZZA,
            "options": [{"label": "Funghi"}, {"label": "Pepperoni"}],
            "custom": False,
        }
    )
    with committed():
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "Lunch?"})
    response = api.post(f"/conversations/{conversation.pk}/respond", {"answers": answers})
    assert response.status_code == 422
    assert response.json()["message"] == str(message)
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.AWAITING_USER


def test_a_stale_tool_call_id_is_409(api, conversation, model, committed):
    model.asks()
    with committed():
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "Lunch?"})
    response = api.post(
        f"/conversations/{conversation.pk}/respond",
        {"answers": {"Which pizza?": "Funghi"}, "toolCallId": "q0"},
    )
    assert response.status_code == 409


def test_cancel_rejects_a_pending_question_and_refuses_when_idle(
    api, conversation, model, committed
):
    model.asks()
    with committed():
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "Lunch?"})
    result = api.post(f"/conversations/{conversation.pk}/cancel").json()
    assert result["status"] == "interrupted"
    assert api.post(f"/conversations/{conversation.pk}/cancel").status_code == 409


def test_cancel_stops_a_running_turn(api, conversation):
    api.post(f"/conversations/{conversation.pk}/messages", {"content": "Lunch?"})
    conversation.refresh_from_db()
    assert conversation.is_running  # its runner starts after commit: not here
    result = api.post(f"/conversations/{conversation.pk}/cancel").json()
    assert result["status"] == "interrupted"
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE


def test_multi_question_answers_take_lists(api, conversation, model, committed):
    model.asks(
        "ask_user_question",
        {
            "questions": [
                {"question": "DB?", "options": [{"label": "PG"}, {"label": "SQLite"}]},
                {
                    "question": "Features?",
                    "options": [{"label": "A"}, {"label": "B"}],
                    "multiSelect": True,
                },
            ]
        },
    )
    with committed():
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "Set up"})
    with committed():
        answered = api.post(
            f"/conversations/{conversation.pk}/respond",
            {"answers": {"DB?": "SQLite", "Features?": ["A", "B", "and C"]}},
        )
    assert answered.status_code == 200
    reply = answered.json()["messages"][0]  # the answer, as the user message it inserted
    assert (reply["role"], reply["text"]) == ("user", "DB?: SQLite\nFeatures?: A, B, and C")
    assert (
        api.get(f"/conversations/{conversation.pk}").json()["messages"][-1]["text"]
        == 'Thanks: {"answers": {"DB?": "SQLite", "Features?": ["A", "B", "and C"]}}'
    )


def test_bad_bodies_are_422_not_500(api, conversation):
    assert api.post(f"/conversations/{conversation.pk}/messages", {"wait": 5}).status_code == 422
    response = api.post(
        f"/conversations/{conversation.pk}/messages", {"content": "x", "wait": 9999}
    )
    assert response.status_code == 422
    assert (
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "  "}).status_code == 400
    )


def test_openapi_document(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["info"]["title"] == "Parley API"
    assert "/api/v1/conversations/{conversation_id}/respond" in schema["paths"]
    assert client.get("/api/v1/docs").status_code == 200


def test_create_api_token_prints_it_once_and_stores_only_a_hash(user, capsys):
    call_command("create_api_token", "ada")
    token = capsys.readouterr().out.strip()
    assert token.startswith("parley_")
    record = ApiToken.objects.get()
    assert record.digest == digest(token)
    assert token not in (record.prefix, record.digest, record.name)


def test_the_tokens_page_creates_shows_once_and_revokes(client, user):
    client.force_login(user)
    page = client.post("/settings/tokens/", {"name": "laptop"})
    assert page.status_code == 201
    token = page.context["new_token"]
    assert token in page.content.decode()
    assert token not in client.get("/settings/tokens/").content.decode()
    record = ApiToken.objects.get()
    client.post(f"/settings/tokens/{record.pk}/revoke/")
    assert not ApiToken.objects.exists()
    headers = {"Authorization": f"Bearer {token}"}
    assert Client().get("/api/v1/conversations", headers=headers).status_code == 401
    assert Conversation.objects.count() == 0


def test_the_openapi_document_describes_the_pending_question_fully(client):
    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    pending = schemas["PendingQuestionOut"]["properties"]
    assert {"conversationId", "toolCallId", "tool", "questions", "question", "options"} <= set(
        pending
    )
    question_ref = pending["questions"]["items"]["$ref"].rsplit("/", 1)[1]
    question = schemas[question_ref]["properties"]
    # The wire names of the question contract (question, multiSelect), not the Python field names.
    assert set(question) == {
        "header",
        "question",
        "details",
        "options",
        "multiSelect",
        "custom",
        "default",
        "dangerous",
    }
    option = schemas[question["options"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert set(option["properties"]) == {"label", "description"}


def test_a_pending_question_is_returned_under_its_wire_names(api, conversation, model, committed):
    options = [{"label": "Funghi"}, {"label": "Pepperoni"}]
    model.asks(arguments={"question": PIZZA, "options": options, "multiple": True})
    with committed():
        api.post(f"/conversations/{conversation.pk}/messages", {"content": "Lunch?"})
    [pending] = api.get("/questions").json()
    [question] = pending["questions"]
    assert question["question"] == PIZZA
    assert question["multiSelect"] is True
    assert "text" not in question and "multiple" not in question


# The sub-agents run while the parent's turn waits for them: their commits must be real.
@pytest.mark.django_db(transaction=True)
def test_the_api_returns_children_and_hides_them(api, conversation, user):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    detail = api.get(f"/conversations/{conversation.pk}").json()
    clock, arithmetic = detail["children"]
    assert (clock["number"], clock["title"], clock["status"]) == (1, "Clock", "done")
    assert arithmetic["messages"][-1]["text"].startswith("Six times seven is **42**")
    assert clock["toolCallId"] == detail["messages"][1]["blocks"][-1]["id"]
    assert [c["id"] for c in api.get("/conversations").json()] == [conversation.pk]
    assert api.get(f"/conversations/{clock['id']}").status_code == 404
    assert not clock["superseded"] and not arithmetic["superseded"]


@pytest.mark.django_db(transaction=True)
def test_children_of_a_regenerated_reply_are_marked_superseded(api, conversation, user):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    services.regenerate_reply(user=user, conversation_id=conversation.pk)
    children = api.get(f"/conversations/{conversation.pk}").json()["children"]
    assert [(c["number"], c["superseded"]) for c in children] == [
        (1, True),
        (2, True),
        (1, False),
        (2, False),
    ]


def test_a_regenerated_reply_is_returned_marked_superseded(api, conversation, user, committed):
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="hello")
    with committed():
        services.regenerate_reply(user=user, conversation_id=conversation.pk)

    messages = api.get(f"/conversations/{conversation.pk}").json()["messages"]
    assert [(m["role"], m["superseded"]) for m in messages] == [
        ("user", False),
        ("assistant", True),
        ("assistant", False),
    ]
