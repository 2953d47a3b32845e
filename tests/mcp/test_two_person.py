"""Two-person approval: an `ask` rule with a quorum (questions.rules, ApprovalRule.quorum and
.approvers) makes a call wait for several people's Allow, never that of the person the agent
works for; each vote is kept; the first Deny denies it at once; the model reads who allowed it."""

import pytest
from asgiref.sync import async_to_sync

from chat import services, sharing
from chat.blocks import ToolCallBlock
from chat.engine import turns
from chat.engine.tools import PAUSED, ToolContext
from chat.models import MemberRole
from questions import approvals
from questions.errors import InvalidAnswer
from questions.models import ApprovalRule, ApprovalVote, Question, QuestionStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

NOTE = {"name": "release", "text": "Ship it"}


@pytest.fixture
def team(user, conversation, django_user_model):
    """ada's conversation, shared with bo and cy as participants and dan as one too."""
    people = {}
    for name in ("bo", "cy", "dan"):
        people[name] = django_user_model.objects.create_user(username=name, password=f"pw-{name}")
        sharing.share_conversation(
            user=user,
            conversation_id=conversation.pk,
            username=name,
            role=MemberRole.PARTICIPANT,
        )
    return people


def two_of(user, approvers=("bo", "cy"), quorum=2):
    return ApprovalRule.objects.create(
        scope="user",
        user=user,
        agent="parley",
        server="notes",
        tool="write_note",
        effect="ask",
        quorum=quorum,
        approvers=list(approvers),
    )


@pytest.fixture
def asked(user, conversation, team, write_note):
    """ada's turn writes the release note, and ada's rule wants bo's and cy's Allow."""
    two_of(user)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Release")
    claim = turns.claim(conversation.pk, step_limit=10)
    call = ToolCallBlock(id="w1", name=write_note.name, arguments=NOTE)
    turns.complete_step(claim.lease, text="", tool_calls=[call])
    assert async_to_sync(write_note.run)(call, ToolContext(lease=claim.lease)) is PAUSED
    return call


def vote(person, conversation, decision, **options):
    return approvals.decide(
        user=person,
        conversation_id=conversation.pk,
        tool_call_id="w1",
        decision=decision,
        **options,
    )


def bearer(user) -> dict:
    from api.tokens import create_token

    return {"Authorization": f"Bearer {create_token(user=user, name='rules')[1]}"}


def row() -> Question:
    return Question.objects.get(tool_call_id="w1")


def run(conversation, tool, call):
    claim = turns.claim(conversation.pk, step_limit=10)
    return async_to_sync(tool.run)(call, ToolContext(lease=claim.lease))


def test_it_waits_for_two_allows_and_the_model_reads_who(
    user, conversation, team, asked, server, write_note
):
    assert row().payload.needed == 2
    vote(team["bo"], conversation, "allow")
    assert row().status == QuestionStatus.PENDING
    assert row().payload.votes == ["bo"]
    assert "1 of 2 allowed" in render(row())
    vote(team["cy"], conversation, "allow")
    decided = row()
    assert (decided.status, decided.answered_by) == ("answered", team["cy"])
    assert decided.answers == {"decision": "allow", "votes": ["bo", "cy"]}
    result = run(conversation, write_note, asked)
    assert server.calls == [NOTE]
    assert result.content.startswith("Allowed by bo, cy: this call needed several people's")
    votes = ApprovalVote.objects.filter(question=decided)
    assert [(v.user.username, v.decision, v.via) for v in votes] == [
        ("bo", "allow", "browser"),
        ("cy", "allow", "browser"),
    ]


def render(question) -> str:
    from django.template.loader import render_to_string

    return render_to_string(
        "questions/approval.html", {"block": question.block, "conversation": question.conversation}
    )


def test_the_person_the_agent_works_for_cannot_be_one_of_the_two(user, conversation, asked):
    with pytest.raises(InvalidAnswer, match="not the Allow of the person the agent works for"):
        vote(user, conversation, "allow")
    assert not ApprovalVote.objects.exists()
    assert row().status == QuestionStatus.PENDING


def test_only_the_rules_approvers_may_allow_and_each_once(conversation, team, asked):
    with pytest.raises(InvalidAnswer, match="Only the approvers"):
        vote(team["dan"], conversation, "allow")
    vote(team["bo"], conversation, "allow")
    with pytest.raises(InvalidAnswer, match="already decided"):
        vote(team["bo"], conversation, "allow")
    assert row().status == QuestionStatus.PENDING


def test_any_deny_denies_it_at_once(conversation, team, asked, server, write_note):
    vote(team["bo"], conversation, "allow")
    vote(team["cy"], conversation, "deny", feedback="Not on a Friday")
    decided = row()
    assert decided.status == QuestionStatus.REJECTED
    assert decided.answers == {"decision": "deny", "votes": ["bo"], "feedback": "Not on a Friday"}
    result = run(conversation, write_note, asked)
    assert server.calls == []
    assert "Not on a Friday" in result.content


def test_no_always_allow_and_no_edits(conversation, team, asked):
    with pytest.raises(InvalidAnswer, match="without edits"):
        vote(team["bo"], conversation, "always")
    with pytest.raises(InvalidAnswer, match="without edits"):
        vote(team["bo"], conversation, "allow", arguments={"name": "other", "text": "x"})
    html = render(row())
    assert 'value="always"' not in html
    assert "Edit arguments" not in html


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"effect": "allow", "quorum": 2}, "only an ask rule"),
        ({"effect": "ask", "quorum": "all"}, "needs its approvers"),
        ({"effect": "ask", "quorum": 3, "approvers": ["bo", "cy"]}, "more people than"),
    ],
)
def test_a_rule_that_cannot_be_met_is_refused_naming_the_quorum(client, user, fields, said):
    response = client.post(
        "/api/v1/rules",
        {"tool": "write_note", **fields},
        content_type="application/json",
        headers=bearer(user),
    )
    assert response.status_code == 422
    assert said in response.content.decode()


def test_the_api_lists_a_rules_quorum_and_approvers(client, user):
    response = client.post(
        "/api/v1/rules",
        {"tool": "write_note", "effect": "ask", "quorum": "all", "approvers": ["bo", "cy"]},
        content_type="application/json",
        headers=bearer(user),
    )
    assert response.status_code == 201
    assert (response.json()["quorum"], response.json()["approvers"]) == ("all", ["bo", "cy"])
    assert ApprovalRule.objects.get().quorum == 0
