"""The rules API (api.routers.rules): a user lists the deployment's rules and their own,
adds, changes and revokes their own; never sees or touches anyone else's; changes a
deployment rule only as staff; a bad rule is refused with 422 naming the field."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api.tokens import create_token
from chat import services
from questions import rules
from questions.models import ApprovalRule

pytestmark = pytest.mark.django_db

DRAFTS = {"server": "notes", "tool": "write_note", "match": {"name": "draft-*"}, "effect": "allow"}


@pytest.fixture
def call(client, token):
    """(method, path, body) -> the response, as the user (`token`), in JSON."""

    def call(method, path, body=None, *, as_token=None):
        return getattr(client, method)(
            f"/api/v1{path}",
            body,
            content_type="application/json",
            headers={"Authorization": f"Bearer {as_token or token}"},
        )

    return call


def fields_named(response) -> set[str]:
    return {str(error["loc"][-1]) for error in response.json()["errors"]}


def test_a_user_adds_lists_changes_and_revokes_their_rule(call, user):
    added = call("post", "/rules", DRAFTS)
    assert added.status_code == 201
    rule = added.json()
    assert {k: rule[k] for k in ("scope", "server", "tool", "match", "effect", "shadow")} == {
        "scope": "user",
        "server": "notes",
        "tool": "write_note",
        "match": {"name": "draft-*"},
        "effect": "allow",
        "shadow": False,
    }
    assert (rule["createdBy"], rule["uses"], rule["maxUses"]) == ("ada", 0, None)

    listed = call("get", "/rules").json()
    assert [r["id"] for r in listed] == [rule["id"]]

    changed = call("patch", f"/rules/{rule['id']}", {"maxUses": 3, "shadow": True})
    assert changed.status_code == 200
    assert (changed.json()["maxUses"], changed.json()["shadow"]) == (3, True)
    assert changed.json()["match"] == {"name": "draft-*"}  # the fields not given stay

    assert call("delete", f"/rules/{rule['id']}").status_code == 204
    assert not ApprovalRule.objects.exists()
    assert call("delete", f"/rules/{rule['id']}").status_code == 404


def test_a_conversation_rule_needs_a_conversation_the_user_may_act_in(
    call, user, other_user, conversation
):
    theirs = services.create_conversation(owner=other_user, title="Theirs")
    mine = call(
        "post", "/rules", {**DRAFTS, "scope": "conversation", "conversationId": conversation.pk}
    )
    assert mine.status_code == 201 and mine.json()["conversationId"] == conversation.pk
    refused = call(
        "post", "/rules", {**DRAFTS, "scope": "conversation", "conversationId": theirs.pk}
    )
    assert refused.status_code == 422
    assert fields_named(refused) == {"conversationId"}
    assert ApprovalRule.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**DRAFTS, "effect": "maybe"}, "effect"),
        ({k: v for k, v in DRAFTS.items() if k != "tool"}, "tool"),
        ({**DRAFTS, "tool": ""}, "tool"),
        ({**DRAFTS, "match": {"name": 3}}, "name"),
        ({**DRAFTS, "match": {"name": ""}}, "match"),
        ({**DRAFTS, "server": "no spaces"}, "server"),
        ({**DRAFTS, "agent": "cursor"}, "agent"),
        ({**DRAFTS, "maxUses": 0}, "maxUses"),
        ({**DRAFTS, "expiresAt": "2020-01-01T00:00:00Z"}, "expiresAt"),
        ({**DRAFTS, "expiresAt": "2999-01-01T00:00:00"}, "expiresAt"),
        ({**DRAFTS, "scope": "team"}, "scope"),
        ({**DRAFTS, "quorum": 2}, "quorum"),
        ({**DRAFTS, "match": {"name": "draft\u202e-*"}}, "match"),
        ({**DRAFTS, "match": {"name": "a\u0000"}}, "match"),
        ({**DRAFTS, "scope": "conversation", "conversationId": 2**64}, "conversationId"),
    ],
)
def test_a_bad_rule_is_refused_naming_its_field(call, body, field):
    response = call("post", "/rules", body)
    assert response.status_code == 422, response.content
    assert field in fields_named(response)
    assert not ApprovalRule.objects.exists()


def test_a_conversation_rule_without_its_conversation_is_refused_naming_it(call):
    response = call("post", "/rules", {**DRAFTS, "scope": "conversation"})
    assert response.status_code == 422
    assert "conversationId" in str(response.json()["errors"])


def test_nobody_sees_or_touches_someone_elses_rule(call, other_user):
    theirs = ApprovalRule.objects.create(scope="user", user=other_user, tool="x", effect="allow")
    assert call("get", "/rules").json() == []
    assert call("patch", f"/rules/{theirs.pk}", {"effect": "deny"}).status_code == 404
    assert call("delete", f"/rules/{theirs.pk}").status_code == 404
    theirs.refresh_from_db()
    assert theirs.effect == "allow"


def test_deployment_rules_are_read_only_but_for_staff(call, user, other_user):
    operator = ApprovalRule.objects.create(scope="deployment", tool="*", effect="deny")
    assert [r["id"] for r in call("get", "/rules").json()] == [operator.pk]
    assert call("patch", f"/rules/{operator.pk}", {"effect": "allow"}).status_code == 403
    assert call("delete", f"/rules/{operator.pk}").status_code == 403
    assert call("post", "/rules", {**DRAFTS, "scope": "deployment"}).status_code == 403
    other_user.is_staff = True
    other_user.save()
    staff = create_token(user=other_user, name="staff")[1]
    changed = call("patch", f"/rules/{operator.pk}", {"effect": "ask"}, as_token=staff)
    assert changed.status_code == 200 and changed.json()["effect"] == "ask"
    added = call("post", "/rules", {**DRAFTS, "scope": "deployment"}, as_token=staff)
    assert added.status_code == 201 and added.json()["scope"] == "deployment"


def test_the_operators_file_rules_are_listed_without_an_id(call):
    configured = rules.Rule(
        id="config:1",
        scope="deployment",
        tool="Bash",
        effect="deny",
        agent="claude-code",
        match={"command": "rm *"},
    )
    with rules.configured.added(lambda: [configured], key="test"):
        [listed] = call("get", "/rules").json()
    assert (listed["id"], listed["agent"], listed["tool"], listed["match"]) == (
        None,
        "claude-code",
        "Bash",
        {"command": "rm *"},
    )


def test_a_patch_clears_an_expiry_and_refuses_clearing_the_tool(call, user):
    rule = ApprovalRule.objects.create(
        scope="user",
        user=user,
        tool="x",
        effect="allow",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    assert call("patch", f"/rules/{rule.pk}", {"expiresAt": None}).json()["expiresAt"] is None
    refused = call("patch", f"/rules/{rule.pk}", {"tool": None})
    assert refused.status_code == 422 and fields_named(refused) == {"tool"}
