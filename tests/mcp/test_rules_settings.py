"""/settings/tools/ and its rules (mcp_client.views): a user lists, adds, edits, revokes and
switches to shadow mode their own rules, sees the operator's read-only, tries a rule on their
last approvals, and never reaches anyone else's rule."""

import pytest

from chat import services
from chat.blocks import ToolCallBlock
from chat.engine import turns
from questions import approvals, asking
from questions.models import ApprovalRule, Question
from questions.payloads import ApprovalRequest

pytestmark = pytest.mark.django_db

ADD = {
    "scope": "user",
    "server": "notes",
    "tool": "write_note",
    "effect": "allow",
    "match": "name = draft-*",
}


@pytest.fixture
def page(client, user):
    client.force_login(user)
    return client


def test_add_rule_lists_it_and_revoke_removes_it(page, user):
    response = page.post("/settings/tools/rules/", ADD)
    assert response.status_code == 302
    rule = ApprovalRule.objects.get()
    assert (rule.user, rule.scope, rule.server, rule.tool, rule.match, rule.effect) == (
        user,
        "user",
        "notes",
        "write_note",
        {"name": "draft-*"},
        "allow",
    )
    html = page.get("/settings/tools/").content.decode()
    assert "Rule added: draft-*" in html
    assert "name = draft-*" in html
    assert f"Revoke rule {rule.pk} on write_note" in html
    assert page.post(f"/settings/tools/rules/{rule.pk}/revoke/").status_code == 302
    assert not ApprovalRule.objects.exists()


def test_a_bad_rule_is_refused_naming_the_field_and_keeps_what_was_typed(page):
    response = page.post("/settings/tools/rules/", {**ADD, "match": "name", "tool": "write_note"})
    assert response.status_code == 422
    html = response.content.decode()
    assert "<code>match</code>" in html
    assert "Write one “name = glob” per line" in html
    assert ">name</textarea>" in html
    assert not ApprovalRule.objects.exists()


def test_a_conversation_rule_only_for_a_conversation_the_user_may_act_in(page, other_user):
    theirs = services.create_conversation(owner=other_user, title="Theirs")
    response = page.post(
        "/settings/tools/rules/", {**ADD, "scope": "conversation", "conversationId": theirs.pk}
    )
    assert response.status_code == 422
    assert "<code>conversationId</code>" in response.content.decode()


def test_edit_and_shadow_mode(page, user):
    rule = ApprovalRule.objects.create(scope="user", user=user, tool="write_note", effect="allow")
    form = page.get(f"/settings/tools/rules/{rule.pk}/").content.decode()
    assert "Save rule" in form
    response = page.post(
        f"/settings/tools/rules/{rule.pk}/",
        {"tool": "write_note", "effect": "deny", "match": "name = secret-*", "maxUses": "5"},
    )
    assert response.status_code == 302
    rule.refresh_from_db()
    assert (rule.effect, rule.match, rule.max_uses, rule.scope) == (
        "deny",
        {"name": "secret-*"},
        5,
        "user",
    )
    page.post(f"/settings/tools/rules/{rule.pk}/shadow/", {"shadow": "on"})
    rule.refresh_from_db()
    assert rule.shadow
    page.post(f"/settings/tools/rules/{rule.pk}/shadow/", {})
    rule.refresh_from_db()
    assert not rule.shadow


def test_nobody_reaches_someone_elses_rule(page, other_user):
    theirs = ApprovalRule.objects.create(
        scope="user", user=other_user, tool="mallorys_tool", effect="allow"
    )
    assert page.get(f"/settings/tools/rules/{theirs.pk}/").status_code == 404
    assert (
        page.post(
            f"/settings/tools/rules/{theirs.pk}/", {"tool": "x", "effect": "deny"}
        ).status_code
        == 404
    )
    assert page.post(f"/settings/tools/rules/{theirs.pk}/revoke/").status_code == 404
    assert (
        page.post(f"/settings/tools/rules/{theirs.pk}/shadow/", {"shadow": "on"}).status_code == 404
    )
    theirs.refresh_from_db()
    assert (theirs.effect, theirs.shadow) == ("allow", False)
    assert "mallorys_tool" not in page.get("/settings/tools/").content.decode()


def test_the_operators_rules_are_shown_read_only(page):
    operator = ApprovalRule.objects.create(scope="deployment", tool="delete_*", effect="deny")
    html = page.get("/settings/tools/").content.decode()
    assert "The operator’s rules" in html and "delete_*" in html
    assert page.post(f"/settings/tools/rules/{operator.pk}/revoke/").status_code == 403
    assert (
        page.post(
            f"/settings/tools/rules/{operator.pk}/", {"tool": "x", "effect": "allow"}
        ).status_code
        == 403
    )
    assert ApprovalRule.objects.filter(pk=operator.pk, effect="deny").exists()


def test_rule_text_is_escaped(page, user):
    ApprovalRule.objects.create(
        scope="user", user=user, tool="<b>x</b>", effect="allow", match={"a": "<script>*"}
    )
    html = page.get("/settings/tools/").content.decode()
    assert "<script>" not in html and "&lt;script&gt;*" in html
    assert "<b>x</b>" not in html


def test_the_dry_run_shows_what_the_rule_would_have_done_to_the_last_calls(
    page, user, conversation
):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Notes")
    lease = turns.claim(conversation.pk, step_limit=10).lease
    calls = [
        ToolCallBlock(id=f"c{i}", name="mcp__notes__write_note", arguments={"name": name})
        for i, name in enumerate(["draft-1", "final"])
    ]
    turns.complete_step(lease, text="", tool_calls=calls)
    asking.ask_approvals(
        lease,
        [
            (
                c,
                ApprovalRequest.of(
                    name=c.name,
                    server="notes",
                    tool="write_note",
                    title="Write",
                    description="",
                    arguments=c.arguments,
                    input_schema={},
                ),
            )
            for c in calls
        ],
    )
    approvals.decide(
        user=user, conversation_id=conversation.pk, tool_call_id="c0", decision="allow"
    )
    approvals.decide(user=user, conversation_id=conversation.pk, tool_call_id="c1", decision="deny")
    rule = ApprovalRule.objects.create(
        scope="user",
        user=user,
        server="notes",
        tool="write_note",
        effect="allow",
        match={"name": "draft-*"},
        max_uses=1,
        uses=1,
    )
    html = page.get(f"/settings/tools/rules/{rule.pk}/?dry_run=1").content.decode()
    assert "What this rule would have done to my last 50 calls" in html
    assert html.count("Would allow") == 1 and html.count("Does not match") == 1
    assert "{&quot;name&quot;: &quot;draft-1&quot;}" in html  # the arguments as JSON
    assert Question.objects.count() == 2
    rule.refresh_from_db()
    assert rule.uses == 1  # a dry run spends nothing


def test_a_two_person_rule_from_the_form_and_one_that_cannot_be_met(page, user):
    response = page.post(
        "/settings/tools/rules/",
        {**ADD, "effect": "ask", "quorum": "2", "approvers": "bo, cy"},
    )
    assert response.status_code == 302
    rule = ApprovalRule.objects.get()
    assert (rule.effect, rule.quorum, rule.approvers) == ("ask", 2, ["bo", "cy"])
    listed = page.get("/settings/tools/").content.decode()
    assert "Needs 2 people’s Allow (bo, cy)" in listed
    refused = page.post(
        f"/settings/tools/rules/{rule.pk}/",
        {"tool": "write_note", "effect": "allow", "quorum": "2", "approvers": "bo, cy"},
    )
    assert refused.status_code == 422
    assert "<code>quorum</code>" in refused.content.decode()
    rule.refresh_from_db()
    assert rule.effect == "ask"
