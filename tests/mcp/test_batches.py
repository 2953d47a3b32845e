"""A step's several approvals decided as a batch (questions.approvals.decide_all), and the
conversation's "a deny stops the step" (on by default): a person's Deny of one call runs none
of the step's others, those still waiting are denied with it, and the model reads which call
was denied and why; with the switch off each call goes by its own decision."""

import pytest
from asgiref.sync import async_to_sync

from chat import services
from chat.blocks import ToolCallBlock
from chat.engine import turns
from chat.engine.tools import PAUSED, ToolContext
from chat.models import AgentState
from questions import approvals
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import Question, QuestionStatus
from questions.payloads import arguments_digest

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

NOTES = [{"name": f"n{i}", "text": f"Note {i}"} for i in range(3)]


@pytest.fixture
def step(user, conversation, write_note):
    """The agent's step writes three notes; each asks. The calls."""
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Save notes")
    claim = turns.claim(conversation.pk, step_limit=10)
    calls = [
        ToolCallBlock(id=f"w{i}", name=write_note.name, arguments=arguments)
        for i, arguments in enumerate(NOTES)
    ]
    turns.complete_step(claim.lease, text="", tool_calls=calls)
    assert async_to_sync(write_note.run)(calls[0], ToolContext(lease=claim.lease)) is PAUSED
    assert Question.objects.filter(status=QuestionStatus.PENDING).count() == 3
    return calls


def seen(calls) -> dict[str, str]:
    """What the card's "Allow all" posts: each call and the digest of the arguments shown."""
    return {call.id: arguments_digest(call.arguments) for call in calls}


def run_step(conversation, tool, calls) -> list:
    """The step goes on: each call's result, as the runner gets it."""
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.TOOL_EXECUTING
    claim = turns.claim(conversation.pk, step_limit=10)
    return [async_to_sync(tool.run)(call, ToolContext(lease=claim.lease)) for call in calls]


def decide(user, conversation, call, decision, **options):
    return approvals.decide(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id=call.id,
        decision=decision,
        **options,
    )


def test_allow_all_runs_exactly_those_calls_once(user, conversation, step, server, write_note):
    approvals.decide_all(
        user=user, conversation_id=conversation.pk, calls=seen(step), decision="allow"
    )
    results = run_step(conversation, write_note, step)
    assert [r.is_error for r in results] == [False] * 3
    assert server.calls == NOTES
    rows = Question.objects.order_by("tool_call_id")
    assert {(q.status, q.answered_by, q.answered_via) for q in rows} == {
        ("answered", user, "browser")
    }


def test_deny_all_runs_none(user, conversation, step, server, write_note):
    approvals.decide_all(
        user=user, conversation_id=conversation.pk, calls=seen(step), decision="deny"
    )
    results = run_step(conversation, write_note, step)
    assert all(r.is_error for r in results)
    assert server.calls == []


def test_allow_all_is_bound_to_the_arguments_the_person_saw(user, conversation, step):
    shown = seen(step)
    shown["w1"] = arguments_digest({"name": "other", "text": "x"})
    with pytest.raises(InvalidAnswer, match="not the ones on your page"):
        approvals.decide_all(
            user=user, conversation_id=conversation.pk, calls=shown, decision="allow"
        )
    assert Question.objects.filter(status=QuestionStatus.PENDING).count() == 3


def test_allow_all_after_one_was_decided_elsewhere_decides_nothing(user, conversation, step):
    conversation.deny_stops_step = False
    conversation.save(update_fields=["deny_stops_step"])
    decide(user, conversation, step[2], "deny")
    with pytest.raises(QuestionAlreadyResolved):
        approvals.decide_all(
            user=user, conversation_id=conversation.pk, calls=seen(step), decision="allow"
        )
    assert Question.objects.filter(status=QuestionStatus.PENDING).count() == 2


def test_a_deny_stops_the_step_and_the_model_reads_which_call_and_why(
    user, conversation, step, server, write_note
):
    decide(user, conversation, step[0], "allow")
    decide(user, conversation, step[1], "deny", feedback="Not n1")
    # The third, still waiting, was denied with it: the step goes on at once.
    third = Question.objects.get(tool_call_id="w2")
    assert (third.status, third.answers["stoppedBy"]) == ("rejected", "write_note")
    results = run_step(conversation, write_note, step)
    assert server.calls == []  # not even the call allowed before the deny
    assert all(r.is_error for r in results)
    assert (
        results[1].content
        == "The user denied this call: the tool did not run. Their feedback: Not n1"
    )
    for stopped in (results[0], results[2]):
        assert stopped.content == (
            "Not run: the user denied another call of this step (write_note), which stops the "
            "whole step. None of its calls ran. Their feedback: Not n1"
        )


def test_with_the_switch_off_each_call_goes_by_its_own_decision(
    user, conversation, step, server, write_note
):
    conversation.deny_stops_step = False
    conversation.save(update_fields=["deny_stops_step"])
    decide(user, conversation, step[0], "allow")
    decide(user, conversation, step[1], "deny")
    assert Question.objects.get(tool_call_id="w2").status == QuestionStatus.PENDING
    decide(user, conversation, step[2], "allow")
    run_step(conversation, write_note, step)
    assert server.calls == [NOTES[0], NOTES[2]]


def statuses_shown(conversation) -> list[str]:
    """What the step's cards show: each approval block's status in the calls' message."""
    from chat.blocks import parse_blocks

    message = Question.objects.filter(conversation=conversation).first().message
    message.refresh_from_db()
    return [b.status for b in parse_blocks(message.blocks) if b.type == "action"]


def test_every_card_of_the_step_shows_its_decision_after_allow_all(user, conversation, step):
    approvals.decide_all(
        user=user, conversation_id=conversation.pk, calls=seen(step), decision="allow"
    )
    assert statuses_shown(conversation) == ["success"] * 3


def test_every_card_of_the_step_shows_its_denial_after_a_message(user, conversation, step):
    """A message while approvals wait denies them all: each card says so, not just the last."""
    services.post_user_message(user=user, conversation_id=conversation.pk, text="No, stop")
    assert statuses_shown(conversation) == ["denied"] * 3


def test_every_card_shows_its_denial_when_a_deny_stops_the_step(user, conversation, step):
    decide(user, conversation, step[1], "deny")
    assert statuses_shown(conversation) == ["denied"] * 3


# --- From the page ----------------------------------------------------------------------------

HTMX = {"HX-Request": "true"}


def test_the_cards_switch_turns_a_deny_stops_the_step_off_and_on(client, user, conversation):
    client.force_login(user)
    url = f"/c/{conversation.pk}/approvals/deny-stops-step/"
    assert client.post(url, {"on": ["off"]}, headers=HTMX).status_code == 204
    conversation.refresh_from_db()
    assert conversation.deny_stops_step is False
    assert client.post(url, {"on": ["off", "on"]}, headers=HTMX).status_code == 204
    conversation.refresh_from_db()
    assert conversation.deny_stops_step is True


def test_a_viewer_cannot_turn_the_switch(client, user, other_user, conversation):
    from chat import sharing
    from chat.models import MemberRole

    sharing.share_conversation(
        user=user,
        conversation_id=conversation.pk,
        username=other_user.username,
        role=MemberRole.VIEWER,
    )
    client.force_login(other_user)
    url = f"/c/{conversation.pk}/approvals/deny-stops-step/"
    response = client.post(url, {"on": ["off"]}, headers=HTMX)
    assert response.status_code == 403
    conversation.refresh_from_db()
    assert conversation.deny_stops_step is True


def test_allow_all_from_the_page_and_its_refusal_said_on_the_card(client, user, conversation, step):
    client.force_login(user)
    url = f"/c/{conversation.pk}/approvals/decide-all/"
    tampered = [f"{call.id} {'0' * 32}" for call in step]
    response = client.post(
        url, {"decision": "allow", "call": tampered, "batch": "w2"}, headers=HTMX
    )
    assert response.status_code == 422
    assert response["HX-Retarget"] == "#approval-batch-w2-alert"
    assert "not the ones on your page" in response.content.decode()
    shown = [f"{call_id} {digest}" for call_id, digest in seen(step).items()]
    response = client.post(url, {"decision": "allow", "call": shown, "batch": "w2"}, headers=HTMX)
    assert response.status_code == 204
    assert not Question.objects.filter(status=QuestionStatus.PENDING).exists()
