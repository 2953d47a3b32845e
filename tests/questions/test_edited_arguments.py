"""Arguments a person edits are checked against the tool's input schema in bounded time
(questions.tool_input): a schema's hostile pattern or a hostile edit is refused at once with a
message saying why, and the rest of the site keeps answering meanwhile."""

import json
import threading
import time
import urllib.request

import pytest
from django.db import connection
from django.test import Client
from django.utils.html import escape

from chat.blocks import ToolCallBlock
from questions import approvals, asking
from questions.approvals import ARGUMENTS_TOO_DEEP, MAX_ARGUMENTS_DEPTH, PATTERN_UNCHECKABLE
from questions.errors import InvalidAnswer
from questions.models import Question, QuestionStatus
from questions.payloads import ApprovalRequest
from tests.api.tool_requests import tool_calls

# Also run on PostgreSQL (make test): the edit and the other request are two connections.
pytestmark = pytest.mark.postgres

HX = {"HX-Request": "true"}
# Python's `re` backtracks on `^(a+)+$` for 2^26 paths against this: seconds of a held GIL.
EVIL = "a" * 26 + "!"


def string_with(pattern: str) -> dict:
    return {"type": "object", "properties": {"name": {"type": "string", "pattern": pattern}}}


# (the tool's input schema, the person's edit, what the refusal says)
HOSTILE = {
    "a backtracking pattern": (string_with("^(a+)+$"), {"name": EVIL}, "does not match"),
    "a pattern RE2 cannot run": (
        string_with("^(?=(a+)+$)"),
        {"name": EVIL},
        escape(PATTERN_UNCHECKABLE % {"pattern": "^(?=(a+)+$)"}),
    ),
    "a backtracking property pattern": (
        {
            "type": "object",
            "patternProperties": {"^(a+)+$": {"type": "string"}},
            "additionalProperties": False,
        },
        {EVIL: "x"},
        "does not match any of the regexes",
    ),
    "unique objects compared pairwise": (
        {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}},
        {"tags": [{"n": n} for n in range(1500)] + [{"n": 0}]},
        "has non-unique elements",
    ),
}


def ask_approval(conversation, schema: dict) -> None:
    """The agent's call `e1` waits for approval, with `schema` as its tool's input schema."""
    call = ToolCallBlock(id="e1", name="mcp__notes__write_note", arguments={"name": "n"})
    lease = tool_calls(conversation.pk, call)
    request = ApprovalRequest.of(
        name=call.name,
        server="notes",
        tool="write_note",
        title="Write note",
        description="",
        arguments=call.arguments,
        input_schema=schema,
    )
    asking.ask_approvals(lease, [(call, request)])


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_edit_is_refused_at_once_and_others_are_answered_meanwhile(
    user, other_user, conversation, dispatched, case
):
    schema, edited, refusal = HOSTILE[case]
    ask_approval(conversation, schema)
    editor, bystander = logged_in(user), logged_in(other_user)
    url = f"/c/{conversation.pk}/questions/e1/decide/"
    # Both have used the site before: what is timed is the check, not a first request's setup.
    assert bystander.get("/questions/").status_code == 200
    assert editor.post(url, {"decision": "allow", "arguments": "{"}, headers=HX).status_code == 422
    edit: dict = {}

    def send_edit():
        started = time.monotonic()
        try:
            edit["response"] = editor.post(
                url, {"decision": "allow", "arguments": json.dumps(edited)}, headers=HX
            )
        finally:
            edit["seconds"] = time.monotonic() - started
            connection.close()

    sender = threading.Thread(target=send_edit)
    sender.start()
    # Another person loads a page, again and again, for as long as the edit is being checked.
    waits = []
    deadline = time.monotonic() + 60
    while not waits or (sender.is_alive() and time.monotonic() < deadline):
        started = time.monotonic()
        assert bystander.get("/questions/").status_code == 200
        waits.append(time.monotonic() - started)
    sender.join()

    response = edit["response"]
    assert response.status_code == 422
    assert response.headers["HX-Retarget"] == "#question-e1-alert"
    assert refusal in response.content.decode()
    assert Question.objects.get(tool_call_id="e1").status == QuestionStatus.PENDING
    assert edit["seconds"] < 1, f"the edit was answered after {edit['seconds']:.1f} s"
    assert max(waits) < 1, f"another page took {max(waits):.1f} s meanwhile"


def decide_edit(user, conversation, edited: dict):
    return approvals.decide(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="e1",
        decision="allow",
        arguments=json.dumps(edited),
    )


@pytest.mark.django_db
def test_a_pattern_still_decides_an_edit(user, conversation, dispatched):
    ask_approval(conversation, string_with(r"^[a-z]+\.md$"))
    with pytest.raises(InvalidAnswer, match="does not match"):
        decide_edit(user, conversation, {"name": "notes.txt"})
    decide_edit(user, conversation, {"name": "notes.md"})
    assert approvals.decision_for(conversation.pk, "e1").arguments == {"name": "notes.md"}


@pytest.mark.django_db
def test_a_schemas_remote_ref_is_never_fetched(user, conversation, dispatched, monkeypatch):
    fetched = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *args, **kwargs: fetched.append(args))
    ask_approval(conversation, {"$ref": "http://127.0.0.1:9/schema.json"})
    decide_edit(user, conversation, {"name": "anything"})
    assert fetched == []
    assert approvals.decision_for(conversation.pk, "e1").arguments == {"name": "anything"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "schema",
    [{"type": 5}, {"type": "object", "properties": {"name": {"enum": 5}}}, {"required": "name"}],
    ids=["a type that is a number", "an enum that is not a list", "required not a list"],
)
def test_an_edit_against_a_schema_that_is_not_json_schema_is_left_to_the_server(
    user, conversation, dispatched, schema
):
    """A schema the server sent that is not JSON Schema cannot judge an edit: it goes through
    as the person wrote it (the server judges the call), never a 500."""
    ask_approval(conversation, schema)
    decide_edit(user, conversation, {"name": "anything"})
    assert approvals.decision_for(conversation.pk, "e1").arguments == {"name": "anything"}


def nested(levels: int) -> str:
    """An object whose `name` nests arrays so that the whole is `levels` deep."""
    return '{"name": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "edited", ["[" * 9000, nested(MAX_ARGUMENTS_DEPTH + 1)], ids=["9000 unclosed", "33 levels"]
)
def test_deeply_nested_edited_arguments_are_a_400_saying_why(
    client, user, conversation, dispatched, edited
):
    ask_approval(conversation, {"type": "object"})
    client.force_login(user)
    response = client.post(
        f"/c/{conversation.pk}/questions/e1/decide/",
        {"decision": "allow", "arguments": edited},
        headers=HX,
    )
    assert response.status_code == 400
    assert response.headers["HX-Retarget"] == "#question-e1-alert"
    assert response.content.decode() == ARGUMENTS_TOO_DEEP % {"limit": MAX_ARGUMENTS_DEPTH}
    assert Question.objects.get(tool_call_id="e1").status == QuestionStatus.PENDING
    # As deep as allowed is allowed.
    decide_edit(user, conversation, json.loads(nested(MAX_ARGUMENTS_DEPTH)))
    assert approvals.decision_for(conversation.pk, "e1").decision == "allow"
