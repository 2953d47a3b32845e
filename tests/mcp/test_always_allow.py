"""Approval rules on MCP tool calls (mcp_client.tools, in process). A person's allow rule is
theirs alone: it lets the tool run without asking in the turns they start, and in nobody
else's (in a shared conversation, a participant's request asks as every approval does,
whatever the owner chose). A rule's decision is recorded as an approval the rule resolved,
naming it; the operator's rules come from MCP_CONFIG; an error while evaluating asks."""

import json

import mcp_types as types
import pytest
from asgiref.sync import async_to_sync

from chat import services, sharing
from chat.blocks import ToolCallBlock
from chat.engine import tools, turns
from chat.engine.tools import PAUSED, ToolContext
from chat.models import AgentState, Conversation, MemberRole
from mcp_client import tools as mcp_tools
from mcp_client.config import parse
from mcp_client.tools import McpTool
from questions import approvals, notifications, rules
from questions.models import ApprovalRule, Question, QuestionKind, QuestionStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared(user, other_user, conversation):
    """`user`'s conversation, shared with `other_user` as a participant."""
    sharing.share_conversation(
        user=user,
        conversation_id=conversation.pk,
        username=other_user.username,
        role=MemberRole.PARTICIPANT,
    )
    return conversation


def always_allows(person, tool: McpTool) -> None:
    ApprovalRule.objects.create(
        scope="user", user=person, agent="parley", server="notes", tool="write_note", effect="allow"
    )


def call_in_turn_of(person, conversation, tool: McpTool):
    """`person` sends a message; the agent's step calls `tool`. What the call came to."""
    services.post_user_message(user=person, conversation_id=conversation.pk, text="Save a note")
    return call_in_running_turn(conversation, tool)


def call_in_running_turn(conversation, tool: McpTool):
    """The running turn's step calls `tool`. What the call came to."""
    claim = turns.claim(conversation.pk, step_limit=10)
    call = ToolCallBlock(id="w1", name=tool.name, arguments={"name": "groceries"})
    turns.complete_step(claim.lease, text="", tool_calls=[call])
    return async_to_sync(tool.run)(call, ToolContext(lease=claim.lease))


def asked(conversation) -> bool:
    conversation.refresh_from_db()
    return (
        conversation.agent_state == AgentState.AWAITING_USER
        and Question.objects.filter(
            conversation=conversation,
            kind=QuestionKind.TOOL_APPROVAL,
            status=QuestionStatus.PENDING,
        ).exists()
    )


def test_the_owners_always_allow_does_not_run_a_participants_call(
    other_user, shared, server, write_note, user
):
    always_allows(user, write_note)
    assert call_in_turn_of(other_user, shared, write_note) == PAUSED
    assert asked(shared)
    assert server.calls == []


def test_the_owners_always_allow_runs_the_owners_own_call_in_a_shared_conversation(
    user, shared, server, write_note
):
    always_allows(user, write_note)
    result = call_in_turn_of(user, shared, write_note)
    assert (result.content, result.is_error) == ("Saved", False)
    assert server.calls == [{"name": "groceries"}]
    assert not asked(shared)


def test_a_participants_always_allow_runs_their_own_call(other_user, shared, server, write_note):
    always_allows(other_user, write_note)
    result = call_in_turn_of(other_user, shared, write_note)
    assert (result.content, result.is_error) == ("Saved", False)
    assert server.calls == [{"name": "groceries"}]


def test_a_participants_always_allow_does_not_run_the_owners_call(
    user, other_user, shared, server, write_note
):
    always_allows(other_user, write_note)
    assert call_in_turn_of(user, shared, write_note) == PAUSED
    assert asked(shared)
    assert server.calls == []


def test_the_owners_always_allow_does_not_run_a_call_of_a_participants_regenerate(
    user, other_user, shared, server, write_note
):
    always_allows(user, write_note)
    services.post_user_message(user=user, conversation_id=shared.pk, text="Save a note")
    lease = turns.claim(shared.pk, step_limit=10).lease
    turns.complete_step(lease, text="Which note?", tool_calls=[])
    services.regenerate_reply(user=other_user, conversation_id=shared.pk)
    assert call_in_running_turn(shared, write_note) == PAUSED
    assert server.calls == []


def rule_for(person, **fields):
    fields = {"server": "notes", "tool": "write_note", "effect": "allow", **fields}
    return ApprovalRule.objects.create(scope="user", user=person, **fields)


def call_with(conversation, tool: McpTool, user, arguments: dict):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Save a note")
    claim = turns.claim(conversation.pk, step_limit=10)
    call = ToolCallBlock(id="w1", name=tool.name, arguments=arguments)
    turns.complete_step(claim.lease, text="", tool_calls=[call])
    return async_to_sync(tool.run)(call, ToolContext(lease=claim.lease))


def test_a_rule_on_arguments_runs_its_calls_and_records_the_decision(
    user, conversation, server, write_note, client
):
    rule = rule_for(user, match={"name": "draft-*"}, max_uses=3)
    heard = []

    def listen(sender, event, **kwargs):
        heard.append((event.type, event.question.tool_call_id, event.question.answered_via))

    notifications.question_changed.connect(listen)
    try:
        result = call_with(conversation, write_note, user, {"name": "draft-1"})
    finally:
        notifications.question_changed.disconnect(listen)
    assert heard == [("approval.resolved", "w1", "rule")]
    assert (result.content, result.is_error) == ("Saved", False)
    row = Question.objects.get(conversation=conversation, tool_call_id="w1")
    assert (row.status, row.answered_via, row.answered_by) == (
        QuestionStatus.ANSWERED,
        "rule",
        None,
    )
    note = row.payload.rule
    assert (note.id, note.scope, note.label, note.uses_left) == (str(rule.pk), "user", "draft-*", 2)
    # The conversation shows it, under the call.
    [shown] = [b for b in row.message.blocks if b.get("action_type") == "tool_approval"]
    assert shown["extra"]["rule"]["id"] == str(rule.pk)
    assert not asked(conversation)
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Allowed by your rule <code>draft-*</code>, 2 uses left" in page


def test_a_call_the_rule_does_not_match_asks(user, conversation, server, write_note):
    rule_for(user, match={"name": "draft-*"})
    assert call_with(conversation, write_note, user, {"name": "final"}) == PAUSED
    assert asked(conversation)
    assert server.calls == []


def test_the_operators_deny_rule_in_mcp_config_refuses_the_call_over_a_users_allow(
    user, conversation, server, write_note
):
    config = parse(
        '{"mcpServers": {"notes": {"command": "notes", "approval": {"rules": '
        '[{"tool": "write_note", "match": {"name": "etc-*"}, "effect": "deny"}]}}}}'
    )
    with rules.configured.added(lambda: config.rules, key="test"):
        rule_for(user, match={"name": "etc-*"})
        result = call_with(conversation, write_note, user, {"name": "etc-passwd"})
    assert (result.content, result.is_error) == (mcp_tools.RULE_DENIED, True)
    row = Question.objects.get(conversation=conversation, tool_call_id="w1")
    assert (row.status, row.answers["rule"]["id"]) == (
        QuestionStatus.REJECTED,
        "config:notes:1",
    )
    assert server.calls == []


def test_an_error_while_evaluating_asks_even_for_a_tool_that_never_asks(
    user, conversation, server, monkeypatch
):
    reader = McpTool(
        server,
        types.Tool(
            name="list_notes",
            input_schema={"type": "object"},
            annotations=types.ToolAnnotations(readOnlyHint=True),
        ),
    )
    tools.register(reader)
    try:
        rule_for(user, tool="list_notes")

        def broken(*args, **kwargs):
            raise RuntimeError("injected")

        monkeypatch.setattr(rules, "_rows", broken)
        assert call_with(conversation, reader, user, {}) == PAUSED
    finally:
        tools.unregister(reader.name)
    assert server.calls == []


def test_mcp_config_rules_load_per_server_and_for_the_whole_file_beside_default_and_tools():
    config = parse(
        """{"mcpServers": {"notes": {"command": "notes", "approval": {
              "default": "ask", "tools": {"list_notes": "allow"},
              "rules": [{"tool": "write_note", "match": {"name": "draft-*"}, "effect": "allow",
                         "shadow": true}]}}},
            "approval": {"rules": [{"agent": "claude-code", "tool": "Bash",
                                    "match": {"command": "rm *"}, "effect": "deny"}]}}"""
    )
    assert config.invalid == {}
    [notes] = config.servers
    assert (notes.policy("list_notes"), notes.policy("write_note")) == ("allow", "ask")
    assert [
        (r.id, r.scope, r.agent, r.server, r.tool, r.match, r.effect, r.shadow)
        for r in config.rules
    ] == [
        ("config:1", "deployment", "claude-code", "", "Bash", {"command": "rm *"}, "deny", False),
        (
            "config:notes:1",
            "deployment",
            "",
            "notes",
            "write_note",
            {"name": "draft-*"},
            "allow",
            True,
        ),
    ]


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ('{"tool": "write_note", "effect": "sometimes"}', "effect"),
        ('{"tool": "write_note", "effect": "allow", "maxUses": 3}', "maxUses"),
        ('{"tool": "write_note", "effect": "allow", "scope": "user"}', "scope"),
    ],
)
def test_a_server_with_a_bad_rule_is_left_out_saying_why(rule, why):
    entry = {"command": "notes", "approval": {"rules": [json.loads(rule)]}}
    config = parse(json.dumps({"mcpServers": {"notes": entry, "other": {"command": "other"}}}))
    assert [s.name for s in config.servers] == ["other"]
    assert why in config.invalid["notes"]


def test_bad_rules_of_the_whole_file_are_left_out_and_the_servers_still_run():
    config = parse('{"mcpServers": {"notes": {"command": "notes"}}, "approval": {"rules": [1]}}')
    assert [s.name for s in config.servers] == ["notes"]
    assert "approval" in config.invalid and config.own_rules == ()


def test_a_sub_agents_call_is_judged_by_the_rules_of_its_parents_turn(user, conversation):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Research")
    child = Conversation.objects.create(owner=user, parent=conversation, parent_tool_call_id="c0")
    ApprovalRule.objects.create(
        scope="conversation",
        user=user,
        conversation=conversation,
        server="notes",
        tool="write_note",
        effect="deny",
    )

    def effect():
        return approvals.verdict_for(
            child.pk, server="notes", tool="write_note", arguments={}, default="allow"
        ).effect

    assert effect() == "deny"
    ApprovalRule.objects.all().delete()
    assert effect() == "allow"


def test_a_rule_that_asks_and_the_shadow_rules_that_matched_are_named_on_the_approval(
    user, conversation, server, write_note
):
    asking_rule = rule_for(user, effect="ask", match={"name": "groceries"})
    shadow = rule_for(user, effect="deny", shadow=True)
    assert call_in_turn_of(user, conversation, write_note) == PAUSED
    row = Question.objects.get(conversation=conversation, tool_call_id="w1")
    assert row.approval.asked_by.id == str(asking_rule.pk)
    assert [(n.id, n.effect) for n in row.approval.shadow] == [(str(shadow.pk), "deny")]
    shown = row.payload
    assert (shown.asked_by.label, shown.shadow[0].label) == ("groceries", "write_note")
    shadow.refresh_from_db()
    assert shadow.uses == 1  # what it would have decided is counted
