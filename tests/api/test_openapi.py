"""The OpenAPI document is a contract: clients are generated from it. Its operations (method,
path, operation id, in order) and its schemas' names stay as they are however the endpoints
are arranged in modules."""

import pytest

OPERATIONS = [
    ("get", "/api/v1/conversations", "api_api_list_conversations"),
    ("post", "/api/v1/conversations", "api_api_create_conversation"),
    ("get", "/api/v1/conversations/{conversation_id}", "api_api_get_conversation"),
    ("get", "/api/v1/conversations/{conversation_id}/messages", "api_api_list_messages"),
    ("post", "/api/v1/conversations/{conversation_id}/messages", "api_api_post_message"),
    ("post", "/api/v1/conversations/{conversation_id}/respond", "api_api_respond"),
    ("post", "/api/v1/conversations/{conversation_id}/cancel", "api_api_cancel"),
    (
        "post",
        "/api/v1/conversations/{conversation_id}/approvals/{tool_call_id}",
        "api_api_decide",
    ),
    ("post", "/api/v1/conversations/{conversation_id}/approvals", "api_api_decide_all"),
    (
        "post",
        "/api/v1/conversations/{conversation_id}/elicitations/{tool_call_id}",
        "api_api_elicitation",
    ),
    ("get", "/api/v1/conversations/{conversation_id}/events", "api_api_events"),
    ("get", "/api/v1/conversations/{conversation_id}/members", "api_api_list_members"),
    ("put", "/api/v1/conversations/{conversation_id}/members/{username}", "api_api_put_member"),
    (
        "delete",
        "/api/v1/conversations/{conversation_id}/members/{username}",
        "api_api_delete_member",
    ),
    ("get", "/api/v1/questions", "api_api_list_questions"),
    # Approval rules (spec 6.3).
    ("get", "/api/v1/rules", "api_api_list_rules"),
    ("post", "/api/v1/rules", "api_api_create_rule"),
    ("patch", "/api/v1/rules/{rule_id}", "api_api_update_rule"),
    ("delete", "/api/v1/rules/{rule_id}", "api_api_delete_rule"),
]

SCHEMAS = {
    "AgentResult",
    "ApprovalDetail",
    "ApprovalOut",
    "Cancel",
    "Choice",
    "ConversationDetail",
    "ConversationIn",
    "ConversationOut",
    "Decide",
    "DecideAll",
    "Elicit",
    "ElicitationDetail",
    "ElicitationOut",
    "FormField",
    "MemberIn",
    "MemberOut",
    "MemberRole",
    "Message",
    "MessageOut",
    "MessagePage",
    "Option",
    "PendingQuestionOut",
    "PostMessage",
    "Question",
    "QuestionStatus",
    "Respond",
    "RuleChanges",
    "RuleIn",
    "RuleNoteOut",
    "RuleOut",
    "SubagentOut",
}

AUDIT = ["questionResolution", "expiresAt", "answeredBy", "answeredAt", "answeredVia", "assignedTo"]


@pytest.fixture
def document(client):
    return client.get("/api/v1/openapi.json").json()


def test_the_document_keeps_its_operations_their_ids_and_their_order(document):
    operations = [
        (method, path, operation["operationId"])
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]
    assert operations == OPERATIONS


def test_the_document_keeps_the_names_of_its_schemas(document):
    assert set(document["components"]["schemas"]) == SCHEMAS


@pytest.mark.parametrize("name", ["PendingQuestionOut", "ApprovalOut", "ElicitationOut"])
def test_a_question_an_approval_and_an_elicitation_end_with_the_same_audit_fields(document, name):
    schemas = document["components"]["schemas"]
    properties = schemas[name]["properties"]
    assert list(properties)[-len(AUDIT) :] == AUDIT
    question = schemas["PendingQuestionOut"]["properties"]
    assert {field: properties[field] for field in AUDIT} == {
        field: question[field] for field in AUDIT
    }
    assert schemas[name]["required"][-1] == "questionResolution"
