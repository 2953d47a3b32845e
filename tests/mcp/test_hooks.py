"""The agent CLIs' permission hooks, in process: each documented input becomes an approval (or
a question) in the session's conversation, each decision the documented output, and what
cannot be read, is too large or comes without a token is refused with nothing created.

The inputs are what Claude Code 2.1.337 and Codex 0.171.0 really sent to a hook server of our
own (the same CLIs drive tests/mcp/test_hooks_live.py against Parley itself)."""

import asyncio
import json
import threading

import pytest
from django.test import AsyncClient

from api.tokens import create_token
from chat.models import Agent, AgentState, Conversation
from mcp_server import hooking
from mcp_server.hook_input import ToolHookInput
from mcp_server.models import AgentCall
from questions import approvals, rules
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import ApprovalRule, Question, QuestionKind, QuestionStatus
from questions.payloads import Answer
from questions.resolving import answer_question

pytestmark = [pytest.mark.django_db]

SESSION = "92520878-8804-4513-a42c-e39cba79fb6c"
# What Claude Code 2.1.337 posts to an http PermissionRequest hook for a Bash call (-p mode).
BASH = {
    "session_id": SESSION,
    "transcript_path": f"/home/me/.claude/projects/-work-proj/{SESSION}.jsonl",
    "cwd": "/work/proj",
    "prompt_id": "bba3d5c5-503a-4911-a03c-86b0ece83ac3",
    "permission_mode": "default",
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "touch /work/proj/ran", "description": "Make a file"},
    "permission_suggestions": [
        {"type": "addDirectories", "directories": ["/work/proj"], "destination": "session"},
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
    ],
}
# Its PreToolUse input for the same call (it has the tool-use id PermissionRequest lacks).
PRE_TOOL_USE = {
    **{k: v for k, v in BASH.items() if k != "permission_suggestions"},
    "hook_event_name": "PreToolUse",
    "tool_use_id": "toolu_01",
}
# What Codex 0.171.0's PermissionRequest command hook reads on stdin (and the Settings page's
# curl forwards) for an escalated exec_command, interactive with -a on-request.
CODEX = {
    "session_id": "01a2513b-1d9c-7c50-a155-4dfa4f8dfd11",
    "turn_id": "01a2513b-1de3-7f62-ac12-dc267d43e17c",
    "transcript_path": "/home/me/.codex/sessions/2026/12/07/rollout-01a2513b.jsonl",
    "cwd": "/work/proj",
    "hook_event_name": "PermissionRequest",
    "model": "gpt-5",
    "permission_mode": "default",
    "tool_name": "Bash",
    "tool_input": {"command": "touch /work/proj/ran", "description": "Make a file"},
}
ASK = {
    **BASH,
    "tool_name": "AskUserQuestion",
    "tool_input": {
        "questions": [
            {
                "question": "Which colour?",
                "header": "Colour",
                "options": [
                    {"label": "Red", "description": "warm"},
                    {"label": "Blue", "description": "cold"},
                ],
                "multiSelect": False,
            }
        ]
    },
}
NOTIFICATION = {
    "session_id": SESSION,
    "transcript_path": BASH["transcript_path"],
    "cwd": "/work/proj",
    "hook_event_name": "Notification",
    "message": "Claude needs your permission to use Bash",
    "notification_type": "permission_prompt",
}
URL = "/hooks/claude-code/permission-request"


def ask(user, body=BASH, agent="claude-code"):
    return hooking.ask_permission(user=user, agent=agent, hook=ToolHookInput.model_validate(body))


def output(waiting, body=BASH):
    return hooking.output_for(waiting=waiting, hook=ToolHookInput.model_validate(body))


def decide(user, waiting, decision, **kwargs):
    question = Question.objects.get(pk=waiting.question_id)
    return approvals.decide(
        user=user,
        conversation_id=question.conversation_id,
        tool_call_id=question.tool_call_id,
        decision=decision,
        **kwargs,
    )


def test_a_permission_request_is_an_approval_in_the_sessions_conversation(user, dispatched):
    waiting = ask(user)
    question = Question.objects.get(pk=waiting.question_id)
    conversation = question.conversation
    assert conversation.title == "Claude Code · proj"
    assert conversation.agent == Agent.EXTERNAL
    assert conversation.agent_state == AgentState.AWAITING_USER
    assert question.kind == QuestionKind.TOOL_APPROVAL
    approval = question.approval
    assert (approval.agent, approval.server, approval.tool, approval.arguments) == (
        "claude-code",
        "",
        "Bash",
        BASH["tool_input"],
    )
    assert approval.description == "Make a file"
    assert AgentCall.objects.get(question=question).session_id == SESSION
    assert dispatched == []


def test_the_next_call_of_the_session_asks_in_the_same_conversation(user):
    first = ask(user)
    decide(user, first, "allow")
    second = ask(user, {**BASH, "tool_input": {"command": "ls"}})
    assert second.conversation_id == first.conversation_id
    other_session = ask(user, {**BASH, "session_id": "another"})
    assert other_session.conversation_id != first.conversation_id


def test_pending_is_no_decision_and_allow_is_the_documented_output(user):
    waiting = ask(user)
    assert output(waiting) == {}
    decide(user, waiting, "allow")
    allowed = {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}
    assert output(waiting) == {"hookSpecificOutput": allowed}
    assert Conversation.objects.get(pk=waiting.conversation_id).agent_state == AgentState.IDLE


def test_always_allow_answers_allow_and_never_hands_back_the_clis_suggestions(user):
    waiting = ask(user)
    decide(user, waiting, "always")
    decided = output(waiting)["hookSpecificOutput"]["decision"]
    assert decided == {"behavior": "allow"}
    assert "updatedPermissions" not in json.dumps(decided)
    # Never a grant of every Bash command: the narrowest rule, this command's first word, for
    # this agent, in this session's conversation.
    [rule] = ApprovalRule.objects.all()
    assert (rule.agent, rule.server, rule.tool, rule.effect) == ("claude-code", "", "Bash", "allow")
    assert rule.match == {"command": "touch*"}
    assert rule.conversation_id == Question.objects.get(pk=waiting.question_id).conversation_id


def test_dont_ask_again_answers_the_same_command_at_once_until_the_rule_is_revoked(user):
    decide(user, ask(user), "always")
    again = ask(user, {**BASH, "tool_input": {"command": "touch /work/proj/more"}})
    assert isinstance(again, hooking.Answered)
    assert again.output["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    # Audited: the rule's decision is an approval of its own, resolved by the rule.
    audited = Question.objects.filter(answered_via="rule").get()
    assert audited.answers["decision"] == "allow"
    assert audited.answers["rule"]["label"] == "touch*"
    assert audited.conversation.agent_state == AgentState.IDLE
    # Another command still asks; revoking the rule asks again for the first.
    other = ask(user, {**BASH, "tool_input": {"command": "rm -rf /work"}})
    assert isinstance(other, hooking.Waiting)
    decide(user, other, "deny")
    rules.revoke_rule(user=user, rule_id=ApprovalRule.objects.get().pk)
    assert isinstance(ask(user), hooking.Waiting)


def test_an_edit_is_returned_as_updated_input(user):
    waiting = ask(user)
    edited = {"command": "touch /work/proj/edited", "description": "Make a file"}
    decide(user, waiting, "allow", arguments=json.dumps(edited))
    assert output(waiting)["hookSpecificOutput"]["decision"] == {
        "behavior": "allow",
        "updatedInput": edited,
    }


def test_deny_carries_the_feedback_as_the_message(user):
    waiting = ask(user)
    decide(user, waiting, "deny", feedback="Use mkdir instead")
    assert output(waiting)["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": "Use mkdir instead",
    }
    other = ask(user, {**BASH, "tool_input": {"command": "ls"}})
    decide(user, other, "deny")
    assert output(other)["hookSpecificOutput"]["decision"]["message"] == hooking.DENIED


def test_pre_tool_use_gets_its_own_documented_output(user):
    waiting = ask(user, PRE_TOOL_USE)
    decide(user, waiting, "deny", feedback="no")
    assert output(waiting, PRE_TOOL_USE) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }


def test_codex_is_asked_as_codex(user):
    waiting = ask(user, CODEX, agent="codex")
    question = Question.objects.get(pk=waiting.question_id)
    assert question.conversation.title == "Codex · proj"
    assert (question.approval.agent, question.approval.server) == ("codex", "")
    decide(user, waiting, "allow")
    assert output(waiting, CODEX)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


def test_an_ended_wait_cannot_be_answered_and_says_it_was_asked_in_the_terminal(user):
    waiting = ask(user)
    assert approvals.end_unanswered(
        question_id=waiting.question_id, reason=approvals.ENDED_TERMINAL
    )
    question = Question.objects.get(pk=waiting.question_id)
    assert question.status == QuestionStatus.CANCELLED
    assert question.payload.ended == approvals.ENDED_TERMINAL
    assert output(waiting) == {}
    with pytest.raises(QuestionAlreadyResolved):
        decide(user, waiting, "allow")
    assert question.conversation.agent_state == AgentState.IDLE
    # The decision won first: the end changes nothing.
    later = ask(user, {**BASH, "tool_input": {"command": "ls"}})
    decide(user, later, "allow")
    assert not approvals.end_unanswered(
        question_id=later.question_id, reason=approvals.ENDED_CLOSED
    )


def test_another_users_token_cannot_see_or_answer_the_approval(user, other_user):
    waiting = ask(user)
    from chat.errors import ConversationNotFound

    with pytest.raises(ConversationNotFound):
        decide(other_user, waiting, "allow")
    assert output(waiting) == {}


def test_a_decision_is_bound_to_the_exact_input(user):
    first = ask(user)
    decide(user, first, "allow")
    again = ask(user)  # the same input, replayed: a new approval, not the old allow
    assert again.question_id != first.question_id
    assert output(again) == {}


def test_ask_user_question_is_a_question_answered_through_updated_input(user):
    waiting = ask(user, ASK)
    question = Question.objects.get(pk=waiting.question_id)
    assert question.kind == "ask_user_question"
    answer_question(
        user=user,
        conversation_id=question.conversation_id,
        tool_call_id=question.tool_call_id,
        answers=[Answer(labels=["Blue"])],
    )
    decided = output(waiting, ASK)["hookSpecificOutput"]["decision"]
    assert decided["behavior"] == "allow"
    assert decided["updatedInput"]["answers"] == {"Which colour?": "Blue"}
    assert decided["updatedInput"]["questions"] == ASK["tool_input"]["questions"]


def rule(user, effect: str, command: str, *, agent: str = "claude-code"):
    spec = rules.RuleIn(agent=agent, tool="Bash", match={"command": command}, effect=effect)
    return rules.create_rule(user=user, spec=spec)


def test_a_rule_answers_at_once_and_its_decision_is_audited(user):
    rule(user, "allow", "npm test*")
    rule(user, "deny", "rm *")
    allowed = ask(user, {**BASH, "tool_input": {"command": "npm test --watch=false"}})
    assert allowed.output["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    denied = ask(user, {**BASH, "tool_input": {"command": "rm -rf /"}})
    assert denied.output["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": hooking.DENIED_BY_RULE,
    }
    audited = Question.objects.order_by("pk")
    assert [(q.answered_via, q.answers["decision"]) for q in audited] == [
        ("rule", "allow"),
        ("rule", "deny"),
    ]
    assert not Question.objects.filter(status=QuestionStatus.PENDING).exists()


def test_a_rule_for_another_agent_does_not_answer(user):
    rule(user, "allow", "npm test*", agent="codex")
    assert isinstance(ask(user, {**BASH, "tool_input": {"command": "npm test"}}), hooking.Waiting)


def test_any_error_while_evaluating_asks_and_never_allows(user, monkeypatch):
    rule(user, "allow", "touch*")
    monkeypatch.setattr(rules, "evaluate", lambda **kwargs: 1 / 0)
    assert isinstance(ask(user), hooking.Waiting)


def test_no_rule_answers_claude_codes_own_question(user):
    rule(user, "allow", "*")
    assert isinstance(ask(user, ASK), hooking.Waiting)


# --- The endpoints -------------------------------------------------------------------------------


@pytest.fixture
def token(user):
    return create_token(user=user, name="hook")[1]


def post(client, url, body, token=None, **extra):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post(url, data, content_type="application/json", headers=headers, **extra)


@pytest.mark.parametrize(
    "url",
    [URL, "/hooks/claude-code/notification", "/hooks/codex/permission-request"],
)
def test_without_a_token_it_is_401(client, url):
    response = post(client, url, BASH)
    assert response.status_code == 401
    assert "Bearer" in response.json()["message"]
    assert post(client, url, BASH, token="parley_wrong").status_code == 401
    assert not Question.objects.exists()


def test_a_body_over_256_kib_is_413(client, token):
    big = {**BASH, "tool_input": {"command": "x" * (256 * 1024)}}
    response = post(client, URL, big, token=token)
    assert response.status_code == 413
    assert not Question.objects.exists()


@pytest.mark.parametrize(
    "body",
    [b"not json", [1, 2], {**BASH, "hook_event_name": "Stop"}, {"session_id": SESSION}],
)
def test_an_input_parley_cannot_read_is_400_and_creates_nothing(client, token, body):
    response = post(client, URL, body, token=token)
    assert response.status_code == 400
    assert response.json()["message"]
    assert not Question.objects.exists()
    assert not Conversation.objects.exists()


def test_a_nul_in_the_input_is_400(client, token):
    response = post(client, URL, {**BASH, "tool_input": {"command": "a\u0000b"}}, token=token)
    assert response.status_code == 400
    assert not Question.objects.exists()


def test_the_hooks_count_against_the_users_rate(client, token, settings):
    settings.PARLEY_MCP_CALLS_PER_MINUTE = 1
    post(client, URL, {**BASH, "hook_event_name": "Stop"}, token=token)
    response = post(client, URL, BASH, token=token)
    assert response.status_code == 429
    assert not Question.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_no_decision_in_time_is_200_without_a_decision(user, token, settings):
    settings.AGENT_HOOK_WAIT = 0.3
    response = asyncio.run(_post_async(URL, BASH, token))
    assert response.status_code == 200
    assert response.json() == {}
    question = Question.objects.get()
    assert question.status == QuestionStatus.CANCELLED
    assert question.payload.ended == approvals.ENDED_TERMINAL


@pytest.fixture
def asked(monkeypatch):
    """Set once the request's approval waits (asking runs on a thread of its own)."""
    event = threading.Event()
    ask_permission = hooking.ask_permission

    def asking(**kwargs):
        waiting = ask_permission(**kwargs)
        event.set()
        return waiting

    monkeypatch.setattr(hooking, "ask_permission", asking)
    return event


async def _until(event: threading.Event, request: asyncio.Task) -> None:
    async with asyncio.timeout(10):
        while not event.is_set():
            assert not request.done(), request.result().content
            await asyncio.sleep(0.01)


@pytest.mark.django_db(transaction=True)
def test_the_request_waits_for_the_persons_decision(user, token, settings, asked):
    settings.AGENT_HOOK_WAIT = 30
    decided = threading.Event()

    def person():
        asked.wait(10)
        question = Question.objects.get()
        approvals.decide(
            user=user,
            conversation_id=question.conversation_id,
            tool_call_id=question.tool_call_id,
            decision="deny",
            feedback="not now",
        )
        decided.set()

    thread = threading.Thread(target=person)
    thread.start()
    response = asyncio.run(_post_async(URL, BASH, token))
    thread.join()
    assert decided.is_set()
    assert response.json()["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": "not now",
    }


@pytest.mark.django_db(transaction=True)
def test_a_request_the_cli_closes_ends_its_approval(user, token, settings, asked):
    settings.AGENT_HOOK_WAIT = 30

    async def scenario():
        request = asyncio.create_task(_post_async(URL, BASH, token))
        await _until(asked, request)
        request.cancel()  # what Django does to the view when the client disconnects
        with pytest.raises(asyncio.CancelledError):
            await request

    asyncio.run(scenario())
    question = Question.objects.get()
    assert question.status == QuestionStatus.CANCELLED
    assert question.payload.ended == approvals.ENDED_CLOSED


async def _post_async(url, body, token):
    return await AsyncClient().post(
        url,
        json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_notification_is_shown_in_the_sessions_conversation(client, token, user):
    response = post(client, "/hooks/claude-code/notification", NOTIFICATION, token=token)
    assert response.status_code == 200
    conversation = Conversation.objects.get()
    assert conversation.title == "Claude Code · proj"
    texts = json.dumps([m.blocks for m in conversation.messages.all()])
    assert "Claude needs your permission to use Bash" in texts


def test_a_notification_of_a_prompt_already_waiting_in_parley_adds_nothing(client, token, user):
    waiting = ask(user)
    conversation = Conversation.objects.get(pk=waiting.conversation_id)
    before = conversation.messages.count()
    response = post(client, "/hooks/claude-code/notification", NOTIFICATION, token=token)
    assert response.status_code == 200
    assert conversation.messages.count() == before


# --- How it reads --------------------------------------------------------------------------------


def card(user, body, agent="claude-code"):
    from django.template.loader import render_to_string

    question = Question.objects.get(pk=ask(user, body, agent=agent).question_id)
    return render_to_string(
        "questions/approval.html", {"block": question.block, "conversation": question.conversation}
    )


def test_a_command_reads_as_a_command_with_its_description_escaped_and_cleaned(user):
    html = card(
        user,
        {
            **BASH,
            "tool_input": {"command": "rm -rf <b>x</b>\u202e", "description": "Tidy\u200b up"},
        },
    )
    assert "Tidy up" in html
    assert "rm -rf &lt;b&gt;x&lt;/b&gt;</code>" in html
    assert "\u202e" not in html
    assert "Edit arguments" in html


def test_an_edit_reads_as_a_diff_and_a_fetch_shows_its_host(user):
    html = card(
        user,
        {
            **BASH,
            "tool_name": "Edit",
            "tool_input": {"file_path": "/p/a.py", "old_string": "x = 1", "new_string": "x = 2"},
        },
    )
    assert '<del class="diff-old"' in html and "x = 1</del>" in html and "x = 2</ins>" in html
    html = card(
        user,
        {
            **BASH,
            "session_id": "s2",
            "tool_name": "WebFetch",
            "tool_input": {"url": "https://docs.example.org/a?b=c", "prompt": "Read it"},
        },
    )
    assert "<strong>docs.example.org</strong>" in html


def test_long_content_is_folded_and_codex_offers_no_edit(user):
    html = card(
        user,
        {
            **BASH,
            "tool_name": "Write",
            "tool_input": {"file_path": "/p/big", "content": "l\n" * 50},
        },
    )
    assert "<details><summary>Show the content</summary>" in html
    html = card(user, CODEX, agent="codex")
    assert "Edit arguments" not in html


def test_a_teammate_the_session_is_shared_with_decides_and_is_audited(user, other_user):
    from chat.models import MemberRole
    from chat.sharing import share_conversation
    from questions.selectors import pending_questions_for_user

    waiting = ask(user)
    share_conversation(
        user=user,
        conversation_id=waiting.conversation_id,
        username=other_user.username,
        role=MemberRole.PARTICIPANT,
    )
    assert [q.pk for q in pending_questions_for_user(user=other_user)] == [waiting.question_id]
    decide(other_user, waiting, "allow")
    question = Question.objects.get(pk=waiting.question_id)
    assert (question.answered_by, question.answered_via) == (other_user, "browser")
    assert output(waiting)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


def test_an_ended_card_says_so_and_offers_no_decision(user):
    from django.template.loader import render_to_string

    waiting = ask(user)
    approvals.end_unanswered(question_id=waiting.question_id, reason=approvals.ENDED_TERMINAL)
    question = Question.objects.get(pk=waiting.question_id)
    html = render_to_string(
        "questions/approval.html", {"block": question.block, "conversation": question.conversation}
    )
    assert "Asked in the terminal instead" in html
    assert 'name="decision"' not in html
    notices = json.dumps([m.blocks for m in question.conversation.messages.all()])
    assert "Asked in the terminal instead." in notices


def test_a_two_person_rule_makes_a_cli_call_wait_for_two_others(user, django_user_model):
    """A CLI's call under an ask rule with a quorum: the token's user can never be one of the
    two, and the CLI hears Allow only after two others allowed it."""
    from chat.models import MemberRole
    from chat.sharing import share_conversation

    ApprovalRule.objects.create(
        scope="user", user=user, agent="claude-code", tool="Bash", effect="ask", quorum=2
    )
    waiting = ask(user)
    question = Question.objects.get(pk=waiting.question_id)
    assert question.payload.needed == 2
    bo, cy = (
        django_user_model.objects.create_user(username=name, password=f"pw-{name}")
        for name in ("bo", "cy")
    )
    for person in (bo, cy):
        share_conversation(
            user=user,
            conversation_id=question.conversation_id,
            username=person.username,
            role=MemberRole.PARTICIPANT,
        )
    with pytest.raises(InvalidAnswer, match="person the agent works for"):
        decide(user, waiting, "allow")
    decide(bo, waiting, "allow")
    assert output(waiting) == {}  # still waiting: 1 of 2
    decide(cy, waiting, "allow")
    assert output(waiting)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
