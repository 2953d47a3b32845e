"""Approvals and elicitations through the JSON API: what GET returns of them, deciding an
approval (allow, always, deny with feedback, edited arguments), answering an elicitation
(accept with content, decline, cancel), and the errors: a bad edit or form (422 saying what is
wrong), a second decision (409), someone else's conversation (404), /respond while an approval
or an elicitation waits (409 naming the endpoint to use)."""

import time

import pytest
from asgiref.sync import async_to_sync

from api.api import BODY_TOO_DEEP, MAX_BODY_DEPTH
from api.tokens import create_token
from api.waiting import wait_until_settled
from chat import services
from chat.models import AgentState, Conversation
from questions.answers import (
    FIELD_NOT_A_CHOICE,
    FIELD_NOT_CHOICES,
    FIELD_REPEATED_CHOICE,
    FIELD_REQUIRED,
    FIELD_TOO_LARGE,
    FIELD_TOO_MANY,
    FIELD_UNKNOWN_CHOICE,
)
from questions.approvals import ARGUMENTS_TOO_DEEP, MAX_ARGUMENTS_DEPTH
from questions.errors import QuestionAlreadyResolved
from questions.models import ApprovalRule, Question, QuestionStatus
from questions.payloads import arguments_digest
from tests.api.tool_requests import (
    SHOPPING,
    WRITE_NOTE,
    WRITE_SCHEMA,
    ask_approvals,
    ask_elicitation,
    write_call,
)

# Also run on PostgreSQL (make test): decisions lock the conversation and update the row.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

AUDIT = {
    "questionResolution",
    "expiresAt",
    "answeredBy",
    "answeredAt",
    "answeredVia",
    "assignedTo",
}
NOTE_FORM = {"name": "groceries", "text": "Milk", "pinned": True, "priority": 5, "colour": "green"}


def state(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).agent_state


def row(call_id: str) -> Question:
    return Question.objects.get(tool_call_id=call_id)


@pytest.fixture
def approval(conversation, dispatched):
    """One approval (w1) waits; turns that resume are dispatched, not run."""
    ask_approvals(conversation.pk)
    return conversation


@pytest.fixture
def elicitation(conversation, dispatched):
    """A running tool waits for its form (elicit_x)."""
    ask_elicitation(conversation.pk)
    return conversation


def decide(api, conversation, call_id="w1", headers=None, **body):
    return api.post(
        f"/conversations/{conversation.pk}/approvals/{call_id}", body, **(headers or {})
    )


def elicit(api, conversation, key="elicit_x", **body):
    return api.post(f"/conversations/{conversation.pk}/elicitations/{key}", body)


# --- What GET returns ------------------------------------------------------------------------


def test_a_pending_approval_in_the_conversation_and_the_listing(api, approval):
    detail = api.get(f"/conversations/{approval.pk}")
    assert detail.status_code == 200
    body = detail.json()
    assert body["state"] == "awaiting_user"
    pending = body["pendingQuestion"]
    assert pending == {
        "conversationId": approval.pk,
        "toolCallId": "w1",
        "tool": "tool_approval",
        "approval": {
            "name": WRITE_NOTE,
            "server": "notes",
            "tool": "write_note",
            "agent": "",
            "title": "Write note",
            "description": "Create or replace a note.",
            "arguments": SHOPPING,
            "inputSchema": WRITE_SCHEMA,
            "argumentsDigest": arguments_digest(SHOPPING),
            "subagentNumber": None,
            "subagent": "",
        },
        "decision": None,
        "stoppedBy": None,
        "editedArguments": None,
        "feedback": "",
        "rule": None,
        "questionResolution": "asked",
        "expiresAt": None,
        "answeredBy": None,
        "answeredAt": None,
        "answeredVia": None,
        "assignedTo": None,
    }
    assert body["pendingQuestions"] == [pending]
    assert api.get("/questions").json() == [pending]


def test_several_approvals_of_one_step_are_all_pending(api, conversation, dispatched):
    ask_approvals(conversation.pk, write_call("w1"), write_call("w2", name="b", text="B"))
    body = api.get(f"/conversations/{conversation.pk}").json()
    assert [q["toolCallId"] for q in body["pendingQuestions"]] == ["w1", "w2"]
    assert body["pendingQuestion"]["toolCallId"] == "w1"  # the first, for older clients
    assert body["pendingQuestions"][1]["approval"]["arguments"] == {"name": "b", "text": "B"}
    assert {q["toolCallId"] for q in api.get("/questions").json()} == {"w1", "w2"}


def test_a_pending_elicitation_while_the_turn_runs(api, elicitation):
    body = api.get(f"/conversations/{elicitation.pk}").json()
    assert body["state"] == "tool_executing"
    assert body["pendingQuestion"] is None  # the turn is not paused: a tool waits
    [pending] = body["pendingQuestions"]
    assert set(pending) == {
        "conversationId",
        "toolCallId",
        "tool",
        "elicitation",
        "action",
        "content",
        *AUDIT,
    }
    assert (pending["toolCallId"], pending["tool"]) == ("elicit_x", "elicitation")
    assert (pending["action"], pending["content"]) == (None, None)
    asked = pending["elicitation"]
    assert {k: asked[k] for k in ("server", "tool", "callId", "message", "mode", "url")} == {
        "server": "notes",
        "tool": "new_note_from_form",
        "callId": "f1",
        "message": "Details for the new note",
        "mode": "form",
        "url": "",
    }
    fields = {f["name"]: f for f in asked["fields"]}
    # (PostgreSQL's jsonb does not keep the schema's order of properties: not compared here.)
    assert sorted(fields) == ["colour", "name", "pinned", "priority", "text"]
    assert fields["name"]["title"] == "Note name" and fields["name"]["required"]
    assert fields["pinned"]["kind"] == "boolean" and not fields["pinned"]["required"]
    priority = fields["priority"]
    assert (priority["kind"], priority["minimum"], priority["maximum"]) == ("integer", 1, 5)
    assert fields["colour"]["kind"] == "enum"
    assert [c["value"] for c in fields["colour"]["choices"]] == ["red", "green", "blue"]
    assert api.get("/questions").json() == [pending]


def test_the_openapi_document_tells_the_kinds_apart(api):
    document = api.get("/openapi.json").json()
    paths = document["paths"]
    assert "post" in paths["/api/v1/conversations/{conversation_id}/approvals/{tool_call_id}"]
    assert "post" in paths["/api/v1/conversations/{conversation_id}/elicitations/{tool_call_id}"]
    schemas = document["components"]["schemas"]
    for name in ("PendingQuestionOut", "ApprovalOut", "ElicitationOut"):
        assert name in schemas
    assert "pendingQuestions" in schemas["AgentResult"]["properties"]


def test_the_conversation_with_approvals_waiting_costs_one_query_more(
    api, conversation, dispatched, django_assert_max_num_queries
):
    ask_approvals(conversation.pk, *(write_call(f"w{n}") for n in range(5)))
    api.get("/conversations")  # the token's last use is recorded
    # The token with its user; the conversation; its newest messages; its sub-agents; the
    # pending rows (one query, however many).
    with django_assert_max_num_queries(5):
        body = api.get(f"/conversations/{conversation.pk}").json()
    assert len(body["pendingQuestions"]) == 5
    with django_assert_max_num_queries(2):
        assert len(api.get("/questions").json()) == 5


# --- Deciding an approval --------------------------------------------------------------------


def test_allow(api, approval, dispatched, committed):
    with committed():
        response = decide(api, approval, decision="allow")
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "running"  # the step goes on: the call runs
    assert (result["pendingQuestion"], result["pendingQuestions"]) == (None, [])
    assert dispatched == [approval.pk]
    question = row("w1")
    assert (question.status, question.answers) == (QuestionStatus.ANSWERED, {"decision": "allow"})
    assert not ApprovalRule.objects.exists()
    [resolved] = api.get("/questions", status="answered").json()
    assert (resolved["decision"], resolved["editedArguments"]) == ("allow", None)
    assert (resolved["questionResolution"], resolved["answeredBy"]) == ("replied", "ada")
    assert resolved["answeredVia"] == "api"


def test_always_allow_keeps_the_narrowest_rule_for_this_user(api, approval, user):
    response = decide(api, approval, headers={"X-Parley-Client": "terminal"}, decision="always")
    assert response.status_code == 200
    [rule] = ApprovalRule.objects.all()
    assert (rule.user, rule.conversation_id, rule.server, rule.tool, rule.effect) == (
        user,
        approval.pk,
        "notes",
        "write_note",
        "allow",
    )
    [resolved] = api.get("/questions", status="answered").json()
    assert resolved["rule"] == {
        "id": str(rule.pk),
        "scope": "conversation",
        "label": "name=shopping, text=Milk, eggs, bread",
        "effect": "allow",
        "usesLeft": None,
        "created": True,
    }
    [resolved] = api.get("/questions", status="answered").json()
    assert (resolved["decision"], resolved["answeredVia"]) == ("always", "terminal")


def test_deny_with_feedback(api, approval, dispatched, committed):
    with committed():
        response = decide(api, approval, decision="deny", feedback="Not that list, the other one.")
    assert response.status_code == 200
    assert dispatched == [approval.pk]  # denied, the step still goes on: the model is told
    question = row("w1")
    assert question.status == QuestionStatus.REJECTED
    [resolved] = api.get("/questions", status="rejected").json()
    assert (resolved["decision"], resolved["feedback"]) == ("deny", "Not that list, the other one.")
    assert resolved["questionResolution"] == "rejected"


def test_allow_with_edited_arguments(api, approval):
    edited = {"name": "shopping", "text": "Milk, eggs, bread, coffee"}
    response = decide(api, approval, decision="allow", arguments=edited)
    assert response.status_code == 200
    assert row("w1").answers == {"decision": "allow", "arguments": edited}
    [resolved] = api.get("/questions", status="answered").json()
    assert resolved["editedArguments"] == edited
    assert resolved["approval"]["arguments"] == SHOPPING  # what the model asked stays


def test_arguments_equal_to_the_models_are_no_edit(api, approval):
    assert decide(api, approval, decision="allow", arguments=SHOPPING).status_code == 200
    assert row("w1").answers == {"decision": "allow"}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"name": "shopping"}, "'text' is a required property"),
        ({"name": "shopping", "text": 7}, "text: 7 is not of type 'string'"),
    ],
)
def test_edited_arguments_that_do_not_fit_the_schema_are_422(api, approval, arguments, problem):
    response = decide(api, approval, decision="allow", arguments=arguments)
    assert response.status_code == 422
    message = response.json()["message"]
    assert message.startswith("The arguments do not fit the tool's input schema")
    assert problem in message
    assert row("w1").is_pending and state(approval) == "awaiting_user"
    # Fixed, it is allowed.
    fixed = decide(api, approval, decision="allow", arguments={**SHOPPING, "text": "Tea"})
    assert fixed.status_code == 200


def nested_text(levels: int) -> str:
    """`text` as arrays nested `levels` deep."""
    return '{"name": "n", "text": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ("[" * 9000, BODY_TOO_DEEP % {"limit": MAX_BODY_DEPTH}),
        (nested_text(990), BODY_TOO_DEEP % {"limit": MAX_BODY_DEPTH}),
        (nested_text(MAX_ARGUMENTS_DEPTH), ARGUMENTS_TOO_DEEP % {"limit": MAX_ARGUMENTS_DEPTH}),
    ],
    ids=["9000 unclosed", "990 levels", "33 levels"],
)
def test_deeply_nested_arguments_are_a_400_saying_why(api, approval, arguments, refusal):
    body = '{"decision": "allow", "arguments": ' + arguments + "}"
    response = api.post(f"/conversations/{approval.pk}/approvals/w1", body)
    assert response.status_code == 400
    assert response.json() == {"message": refusal}
    assert row("w1").is_pending and state(approval) == "awaiting_user"


@pytest.mark.parametrize(
    "body",
    [
        {"decision": "maybe"},
        {"decision": "allow", "arguments": "not an object"},
        {"decision": "allow", "arguments": ["a"]},
        {},
    ],
)
def test_a_body_that_is_not_a_decision_is_422(api, approval, body):
    response = decide(api, approval, **body)
    assert response.status_code == 422
    assert response.json()["message"] == "The request is not valid."
    assert row("w1").is_pending


def test_feedback_too_long_is_422(api, approval):
    response = decide(api, approval, decision="deny", feedback="x" * 2001)
    assert response.status_code == 422
    assert response.json()["message"] == "The feedback is too long."


def test_a_second_decision_is_409(api, approval):
    assert decide(api, approval, decision="deny").status_code == 200
    again = decide(api, approval, decision="allow")
    assert again.status_code == 409
    assert again.json() == {"message": str(QuestionAlreadyResolved.default_message)}
    assert row("w1").status == QuestionStatus.REJECTED
    unknown = decide(api, approval, call_id="nope", decision="allow")
    assert unknown.status_code == 409


def test_another_users_approval_is_404(client, approval, other_user):
    theirs = {"Authorization": f"Bearer {create_token(user=other_user, name='t')[1]}"}
    for path, body in [
        ("approvals/w1", {"decision": "allow"}),
        ("elicitations/elicit_x", {"action": "accept"}),
    ]:
        response = client.post(
            f"/api/v1/conversations/{approval.pk}/{path}",
            body,
            content_type="application/json",
            headers=theirs,
        )
        assert response.status_code == 404
        assert response.json() == {"message": "That conversation does not exist."}
    assert row("w1").is_pending
    assert client.get("/api/v1/questions", headers=theirs).json() == []


def test_each_approval_of_a_step_is_decided_on_its_own(api, conversation, dispatched, committed):
    conversation.deny_stops_step = False  # the switch off: a deny stops only its own call
    conversation.save(update_fields=["deny_stops_step"])
    ask_approvals(conversation.pk, write_call("w1"), write_call("w2", name="b", text="B"))
    with committed():
        first = decide(api, conversation, "w2", decision="deny").json()
    assert first["status"] == "needs_input"  # w1 still waits
    assert [q["toolCallId"] for q in first["pendingQuestions"]] == ["w1"]
    assert first["pendingQuestion"]["toolCallId"] == "w1"
    assert dispatched == []
    with committed():
        last = decide(api, conversation, "w1", decision="allow").json()
    assert (last["status"], last["pendingQuestions"]) == ("running", [])
    assert dispatched == [conversation.pk]


def test_by_default_a_deny_denies_the_steps_other_waiting_calls_with_it(
    api, conversation, dispatched, committed
):
    ask_approvals(conversation.pk, write_call("w1"), write_call("w2", name="b", text="B"))
    with committed():
        after = decide(api, conversation, "w2", decision="deny", feedback="Not now").json()
    assert (after["status"], after["pendingQuestions"]) == ("running", [])
    assert dispatched == [conversation.pk]
    assert (row("w1").status, row("w1").answers) == (
        "rejected",
        {"decision": "deny", "stoppedBy": "Write note", "feedback": "Not now"},
    )


def test_respond_while_an_approval_waits_names_the_approvals_endpoint(api, approval):
    response = api.post(f"/conversations/{approval.pk}/respond", {"answers": {"x": "y"}})
    assert response.status_code == 409
    assert response.json()["message"] == (
        "A tool call waits for approval, not an answer: decide it with POST "
        f"/api/v1/conversations/{approval.pk}/approvals/w1."
    )
    assert row("w1").is_pending


def test_cancel_while_approvals_wait_denies_them_and_stops(api, conversation, dispatched):
    ask_approvals(conversation.pk, write_call("w1"), write_call("w2", name="b", text="B"))
    response = api.post(f"/conversations/{conversation.pk}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "interrupted"
    assert set(Question.objects.values_list("status", flat=True)) == {QuestionStatus.REJECTED}
    assert state(conversation) == AgentState.IDLE


def test_a_message_while_approvals_wait_denies_them_with_it_as_feedback(
    api, conversation, model, committed
):
    ask_approvals(conversation.pk, write_call("w1"), write_call("w2", name="b", text="B"))
    with committed():
        sent = api.post(f"/conversations/{conversation.pk}/messages", {"content": "No, wait."})
    assert sent.status_code == 200
    denied = api.get("/questions", status="rejected").json()
    assert sorted(q["toolCallId"] for q in denied) == ["w1", "w2"]
    assert {(q["decision"], q["feedback"], q["answeredVia"]) for q in denied} == {
        ("deny", "No, wait.", "auto-resolve")
    }
    assert api.get(f"/conversations/{conversation.pk}").json()["pendingQuestions"] == []


# `wait` answers once the turn that the decision's own commit resumes has run.
@pytest.mark.django_db(transaction=True)
def test_the_last_decision_waits_for_the_turn(api, conversation, model):
    ask_approvals(conversation.pk)
    result = decide(api, conversation, decision="deny", feedback="No.", wait=5).json()
    assert result["status"] == "complete"
    assert result["response"] == "Done."
    denied = [
        block
        for message in result["messages"]
        for block in message["blocks"]
        if block.get("type") == "tool_result" and block.get("tool_call_id") == "w1"
    ]
    assert denied and denied[0]["is_error"]


# --- Answering an elicitation ----------------------------------------------------------------


def test_accept_with_content(api, elicitation):
    response = elicit(api, elicitation, action="accept", content=NOTE_FORM)
    assert response.status_code == 200
    result = response.json()
    assert (result["status"], result["pendingQuestions"]) == ("running", [])
    question = row("elicit_x")
    assert question.status == QuestionStatus.ANSWERED
    assert question.answers == {"action": "accept", "content": NOTE_FORM}
    [answered] = api.get("/questions", status="answered").json()
    assert (answered["action"], answered["content"]) == ("accept", NOTE_FORM)
    assert (answered["answeredBy"], answered["answeredVia"]) == ("ada", "api")


def test_accept_converts_and_leaves_out_optional_fields(api, elicitation):
    content = {"name": "n", "text": "t", "colour": "red", "priority": "4"}
    assert elicit(api, elicitation, action="accept", content=content).status_code == 200
    assert row("elicit_x").answers["content"] == {
        "name": "n",
        "text": "t",
        "pinned": False,
        "priority": 4,
        "colour": "red",
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({**NOTE_FORM, "name": ""}, FIELD_REQUIRED % {"field": "Note name"}),
        ({**NOTE_FORM, "priority": 9}, FIELD_TOO_LARGE % {"field": "Priority", "limit": "5"}),
        ({**NOTE_FORM, "colour": "purple"}, FIELD_NOT_A_CHOICE % {"field": "Colour"}),
        (None, FIELD_REQUIRED % {"field": "Note name"}),
    ],
)
def test_content_that_does_not_fit_the_form_is_422(api, elicitation, content, message):
    response = elicit(api, elicitation, action="accept", content=content)
    assert response.status_code == 422
    assert response.json() == {"message": str(message)}
    assert row("elicit_x").is_pending
    assert state(elicitation) == "tool_executing"


# A form with several choices: 1 or 2 tags of 3, titled.
TAGS_FORM = {
    "type": "object",
    "properties": {
        "tags": {
            "type": "array",
            "title": "Tags",
            "items": {"anyOf": [{"const": t, "title": t.title()} for t in ("work", "home", "fun")]},
            "minItems": 1,
            "maxItems": 2,
        }
    },
    "required": ["tags"],
}


@pytest.fixture
def tags_elicitation(conversation, dispatched):
    """A running tool waits for its tags (elicit_t)."""
    ask_elicitation(conversation.pk, key="elicit_t", schema=TAGS_FORM)
    return conversation


def test_several_choices_are_described_and_taken_as_a_list(api, tags_elicitation):
    [pending] = api.get("/questions").json()
    [field] = pending["elicitation"]["fields"]
    assert (field["kind"], field["minItems"], field["maxItems"]) == ("array", 1, 2)
    assert [(c["value"], c["title"]) for c in field["choices"]] == [
        ("work", "Work"),
        ("home", "Home"),
        ("fun", "Fun"),
    ]
    response = elicit(
        api, tags_elicitation, key="elicit_t", action="accept", content={"tags": ["fun", "work"]}
    )
    assert response.status_code == 200
    assert row("elicit_t").answers == {"action": "accept", "content": {"tags": ["fun", "work"]}}


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ([], FIELD_REQUIRED % {"field": "Tags"}),
        (["work", "home", "fun"], FIELD_TOO_MANY % {"field": "Tags", "limit": 2}),
        (["work", "play"], FIELD_UNKNOWN_CHOICE % {"field": "Tags", "value": "play"}),
        (["home", "home"], FIELD_REPEATED_CHOICE % {"field": "Tags", "value": "home"}),
        ("work", FIELD_NOT_CHOICES % {"field": "Tags"}),
        ([True], FIELD_NOT_CHOICES % {"field": "Tags"}),
    ],
)
def test_several_choices_that_do_not_fit_are_422(api, tags_elicitation, tags, message):
    response = elicit(
        api, tags_elicitation, key="elicit_t", action="accept", content={"tags": tags}
    )
    assert response.status_code == 422
    assert response.json() == {"message": str(message)}
    assert row("elicit_t").is_pending


@pytest.mark.parametrize(
    ("action", "status", "resolution"),
    [
        ("decline", QuestionStatus.REJECTED, "rejected"),
        ("cancel", QuestionStatus.CANCELLED, "cancelled"),
    ],
)
def test_decline_and_cancel(api, elicitation, action, status, resolution):
    response = elicit(api, elicitation, action=action, content={"ignored": True})
    assert response.status_code == 200
    question = row("elicit_x")
    assert (question.status, question.answers) == (status, {"action": action})
    [answered] = api.get("/questions", status=status).json()
    assert (answered["action"], answered["content"]) == (action, None)
    assert answered["questionResolution"] == resolution
    assert state(elicitation) == "tool_executing"  # the tool goes on with the answer


def test_a_second_answer_to_an_elicitation_is_409(api, elicitation):
    assert elicit(api, elicitation, action="decline").status_code == 200
    assert elicit(api, elicitation, action="accept", content=NOTE_FORM).status_code == 409
    assert elicit(api, elicitation, key="w1", action="cancel").status_code == 409


def test_an_approval_is_not_an_elicitation_nor_the_other_way_round(api, conversation):
    ask_approvals(conversation.pk)
    assert elicit(api, conversation, key="w1", action="accept").status_code == 409
    assert row("w1").is_pending


def test_a_bad_action_is_422(api, elicitation):
    assert elicit(api, elicitation, action="maybe").status_code == 422
    assert row("elicit_x").is_pending


def test_respond_while_a_tool_asks_names_the_elicitations_endpoint(api, elicitation):
    response = api.post(f"/conversations/{elicitation.pk}/respond", {"answers": {"x": "y"}})
    assert response.status_code == 409
    assert response.json()["message"] == (
        "A tool asks for values, not an answer: reply with POST "
        f"/api/v1/conversations/{elicitation.pk}/elicitations/elicit_x."
    )


def test_a_wait_ends_when_a_running_tool_asks(elicitation):
    """A call with `wait` (a message, an answer) returns as soon as a running tool waits for
    the person, not when its wait runs out: the tool would wait for as long."""
    started = time.monotonic()
    async_to_sync(wait_until_settled)(elicitation.pk, 5)
    assert time.monotonic() - started < 2


# Bidi overrides, zero-width characters, a Unicode tag character, NUL and a lone surrogate:
# PostgreSQL's JSON takes neither NUL nor a lone surrogate.
HIDDEN = "\u202e\u200b\U000e0041\x00\ud800"


def test_hidden_characters_are_dropped_from_edits_and_forms_never_a_500(api, conversation):
    ask_approvals(conversation.pk)
    edited = {"name": f"shop{HIDDEN}ping", "text": f"Tea{HIDDEN}"}
    assert decide(api, conversation, decision="allow", arguments=edited).status_code == 200
    assert row("w1").answers["arguments"] == {"name": "shopping", "text": "Tea"}
    second = services.create_conversation(owner=conversation.owner)
    ask_elicitation(second.pk)
    content = {**NOTE_FORM, "name": f"gro{HIDDEN}ceries", f"te{HIDDEN}xt": "Milk"}
    assert elicit(api, second, action="accept", content=content).status_code == 200
    assert Question.objects.get(conversation=second).answers["content"]["name"] == "groceries"


def test_a_steps_approvals_are_allowed_together_bound_to_the_arguments_seen(
    api, conversation, dispatched, committed
):
    ask_approvals(conversation.pk, write_call("w1"), write_call("w2", name="b", text="B"))
    listed = api.get("/questions").json()
    seen = {q["toolCallId"]: q["approval"]["argumentsDigest"] for q in listed}
    assert set(seen) == {"w1", "w2"}
    changed = api.post(
        f"/conversations/{conversation.pk}/approvals",
        {"decision": "allow", "calls": {**seen, "w2": "0" * 32}},
    )
    assert changed.status_code == 422
    assert "not the ones on your page" in changed.json()["message"]
    assert row("w1").is_pending and row("w2").is_pending
    with committed():
        done = api.post(
            f"/conversations/{conversation.pk}/approvals", {"decision": "allow", "calls": seen}
        )
    assert done.status_code == 200
    assert (done.json()["status"], done.json()["pendingQuestions"]) == ("running", [])
    assert {row("w1").status, row("w2").status} == {"answered"}
    assert dispatched == [conversation.pk]
