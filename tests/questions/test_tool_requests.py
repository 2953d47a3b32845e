"""Approvals and tools' requests, asked (questions.asking) and resolved exactly once
(questions.approvals, questions.resolving): several approvals of one step asked together and
decided one by one, Always allow, Deny with feedback, edited arguments checked against the
tool's schema, a message instead, expiry; an elicitation answered, expired, or ended with its
call."""

import re

import pytest
from django.urls import reverse

from chat import services
from chat.blocks import ToolCallBlock, parse_blocks
from chat.engine import turns
from chat.errors import ConversationNotFound
from chat.models import AgentState
from questions import approvals, asking, resolving, rules, selectors
from questions import resolving as questions
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import ApprovalRule, Question, QuestionKind, QuestionStatus
from questions.payloads import ApprovalRequest, ElicitationRequest

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
    "required": ["name", "text"],
}


def request_for(call: ToolCallBlock) -> ApprovalRequest:
    return ApprovalRequest.of(
        name="mcp__notes__write_note",
        server="notes",
        tool="write_note",
        title="Write note <b>now</b>",
        description="Create or **replace** a note. <script>alert(1)</script>",
        arguments=call.arguments,
        input_schema=SCHEMA,
    )


@pytest.fixture
def running(user, conversation):
    """The agent's step made `calls` and the turn runs them: (lease, calls)."""

    def running(*names):
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Notes")
        claim = turns.claim(conversation.pk, step_limit=10)
        calls = [
            ToolCallBlock(id=f"c{i}", name=name, arguments={"name": f"n{i}", "text": "t"})
            for i, name in enumerate(names)
        ]
        state = turns.complete_step(claim.lease, text="", tool_calls=calls)
        assert state.state == AgentState.TOOL_EXECUTING
        return claim.lease, calls

    return running


@pytest.fixture
def asked(running):
    """Two write calls of one step, both asking for approval."""
    lease, calls = running("mcp__notes__write_note", "mcp__notes__write_note")
    assert asking.ask_approvals(lease, [(c, request_for(c)) for c in calls])
    return calls


def decide(user, conversation, call, decision, **options):
    return approvals.decide(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id=call.id,
        decision=decision,
        **options,
    )


def state(conversation):
    conversation.refresh_from_db()
    return conversation.agent_state


def test_approvals_of_one_step_are_asked_together_and_the_step_goes_on_when_all_are_decided(
    user, conversation, asked
):
    assert state(conversation) == AgentState.AWAITING_USER
    rows = Question.objects.filter(conversation=conversation, kind=QuestionKind.TOOL_APPROVAL)
    assert [q.tool_call_id for q in rows.order_by("id")] == ["c0", "c1"]
    # Both blocks are under the calls' message, pending.
    message = rows.first().message
    blocks = [b for b in parse_blocks(message.blocks) if b.type == "action"]
    assert [(b.action_type, b.status) for b in blocks] == [("tool_approval", "pending")] * 2

    decide(user, conversation, asked[0], "allow")
    assert state(conversation) == AgentState.AWAITING_USER  # c1 still waits
    decide(user, conversation, asked[1], "deny", feedback="  Not this one  ")
    assert state(conversation) == AgentState.TOOL_EXECUTING

    first = approvals.decision_for(conversation.pk, "c0")
    second = approvals.decision_for(conversation.pk, "c1")
    assert (first.status, first.decision, first.arguments) == ("answered", "allow", None)
    assert (second.status, second.decision, second.feedback) == ("rejected", "deny", "Not this one")
    row = Question.objects.get(conversation=conversation, tool_call_id="c1")
    assert (row.answered_by, row.answered_via) == (user, "browser")


def allowed(conversation, arguments) -> bool:
    verdict = approvals.verdict_for(
        conversation.pk, server="notes", tool="write_note", arguments=arguments, default="ask"
    )
    return verdict.effect == "allow"


def test_always_allow_keeps_the_users_narrowest_rule_and_it_is_revocable(user, conversation, asked):
    decide(user, conversation, asked[0], "always")
    [rule] = ApprovalRule.objects.all()
    assert (rule.scope, rule.user, rule.conversation, rule.agent) == (
        "conversation",
        user,
        conversation,
        "parley",
    )
    assert (rule.server, rule.tool, rule.match, rule.effect) == (
        "notes",
        "write_note",
        {"name": "n0", "text": "t"},
        "allow",
    )
    # The block names the rule it made.
    row = Question.objects.get(tool_call_id="c0")
    assert row.payload.rule.id == str(rule.pk) and row.payload.rule.created
    # The user started this turn: their rule counts in it (tests/mcp/test_always_allow), for
    # exactly the arguments they saw.
    assert allowed(conversation, {"name": "n0", "text": "t"})
    assert not allowed(conversation, {"name": "n1", "text": "t"})
    rules.revoke_rule(user=user, rule_id=rule.pk)
    assert not allowed(conversation, {"name": "n0", "text": "t"})
    with pytest.raises(rules.RuleNotFound):
        rules.revoke_rule(user=user, rule_id=rule.pk)


@pytest.mark.parametrize(
    ("edited", "error"),
    [
        ('{"name": "x"}', "'text' is a required property"),
        ('{"name": 1, "text": "t"}', "name: 1 is not of type 'string'"),
        ("[1, 2]", "must be a JSON object"),
        ('{"name": ', "not valid JSON"),
        ("x" * 20_001, "too long"),
    ],
)
def test_a_bad_edit_says_what_is_wrong_and_changes_nothing(
    user, conversation, asked, edited, error
):
    with pytest.raises(InvalidAnswer, match=error):
        decide(user, conversation, asked[0], "allow", arguments=edited)
    assert Question.objects.get(tool_call_id="c0").status == QuestionStatus.PENDING
    assert state(conversation) == AgentState.AWAITING_USER


def test_an_edit_is_stored_and_an_unchanged_one_is_not_an_edit(user, conversation, asked):
    decide(user, conversation, asked[0], "allow", arguments='{"name": "n0", "text": "t"}')
    decide(user, conversation, asked[1], "allow", arguments='{"name": "new", "text": "t"}')
    assert approvals.decision_for(conversation.pk, "c0").arguments is None
    assert approvals.decision_for(conversation.pk, "c1").arguments == {
        "name": "new",
        "text": "t",
    }


def test_a_decision_counts_once_and_only_for_the_owner(user, other_user, conversation, asked):
    decide(user, conversation, asked[0], "allow")
    with pytest.raises(QuestionAlreadyResolved):
        decide(user, conversation, asked[0], "deny")
    with pytest.raises(ConversationNotFound):
        decide(other_user, conversation, asked[1], "allow")
    with pytest.raises(InvalidAnswer):
        decide(user, conversation, asked[1], "maybe")
    assert approvals.decision_for(conversation.pk, "c0").decision == "allow"


def test_a_message_instead_denies_every_waiting_call_with_it_as_feedback(user, conversation, asked):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Stop, use X")
    assert state(conversation) == AgentState.TOOL_EXECUTING
    for call in asked:
        decided = approvals.decision_for(conversation.pk, call.id)
        assert (decided.decision, decided.feedback) == ("deny", "Stop, use X")


def test_an_expired_approval_runs_nothing_and_the_step_goes_on(user, conversation, asked, clock):
    Question.objects.filter(conversation=conversation).update(expires_at=clock_now())
    clock.advance(1)
    for row in Question.objects.filter(conversation=conversation):
        assert questions.expire_question(question_id=row.pk)
    assert state(conversation) == AgentState.TOOL_EXECUTING
    assert approvals.decision_for(conversation.pk, "c0").status == QuestionStatus.EXPIRED


def clock_now():
    from django.utils import timezone

    return timezone.now()


def test_cancel_rejects_every_approval_of_the_step(user, conversation, asked):
    questions.cancel(user=user, conversation_id=conversation.pk)
    assert state(conversation) == AgentState.IDLE
    statuses = set(Question.objects.values_list("status", flat=True))
    assert statuses == {QuestionStatus.REJECTED}


# --- Elicitations ------------------------------------------------------------------------------

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Note name", "maxLength": 10},
        "priority": {"type": "integer", "title": "Priority", "minimum": 1, "maximum": 5},
        "pinned": {"type": "boolean", "title": "Pinned", "default": False},
        "colour": {"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"]},
    },
    "required": ["name"],
}


@pytest.fixture
def elicited(running):
    lease, [call] = running("mcp__notes__new_note_from_form")
    request = ElicitationRequest(
        server="notes", call_id=call.id, message="Details <i>please</i>", requested_schema=FORM
    )
    return asking.ask_elicitation(lease, call, request, key="elicit_1")


def respond(user, conversation, action, values=None):
    return resolving.answer_elicitation(
        user=user,
        conversation_id=conversation.pk,
        tool_call_id="elicit_1",
        action=action,
        values=values,
    )


def test_an_elicitation_waits_without_pausing_the_turn_and_is_answered_with_typed_values(
    user, conversation, elicited
):
    assert state(conversation) == AgentState.TOOL_EXECUTING  # the tool is still running
    assert elicited.is_pending and elicited.kind == QuestionKind.ELICITATION
    assert selectors.elicitation_outcome(conversation.pk, "elicit_1") is None
    fields = [(f.name, f.kind, f.label, f.required) for f in elicited.payload.fields]
    assert fields == [
        ("name", "string", "Note name", True),
        ("priority", "integer", "Priority", False),
        ("pinned", "boolean", "Pinned", False),
        ("colour", "enum", "colour", False),
    ]
    with pytest.raises(InvalidAnswer, match="Note name is required"):
        respond(user, conversation, "accept", {"priority": "3"})
    with pytest.raises(InvalidAnswer, match="Priority must be at most 5"):
        respond(user, conversation, "accept", {"name": "a", "priority": "9"})
    with pytest.raises(InvalidAnswer, match="Priority must be a whole number"):
        respond(user, conversation, "accept", {"name": "a", "priority": "2.5"})
    with pytest.raises(InvalidAnswer, match="Pick one of the choices for colour"):
        respond(user, conversation, "accept", {"name": "a", "colour": "blue"})
    with pytest.raises(InvalidAnswer, match="at most 10 characters"):
        respond(user, conversation, "accept", {"name": "a" * 11})
    respond(user, conversation, "accept", {"name": "a", "priority": "4", "pinned": "true"})
    assert selectors.elicitation_outcome(conversation.pk, "elicit_1") == (
        "accept",
        {"name": "a", "priority": 4, "pinned": True},
    )
    assert state(conversation) == AgentState.TOOL_EXECUTING
    with pytest.raises(QuestionAlreadyResolved):
        respond(user, conversation, "decline")


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_send_no_values(user, conversation, elicited, action):
    respond(user, conversation, action)
    assert selectors.elicitation_outcome(conversation.pk, "elicit_1") == (action, None)


def test_an_elicitation_whose_call_ended_or_expired_is_a_cancel(
    user, conversation, elicited, clock
):
    resolving.end_running_request(conversation.pk, "elicit_1")
    elicited.refresh_from_db()
    assert elicited.status == QuestionStatus.CANCELLED
    assert selectors.elicitation_outcome(conversation.pk, "elicit_1") == ("cancel", None)
    with pytest.raises(QuestionAlreadyResolved):
        respond(user, conversation, "accept", {"name": "late"})


# --- Pages -------------------------------------------------------------------------------------


@pytest.fixture
def browser(client, user):
    client.force_login(user)
    client.get("/")  # the session is in the cache from here on
    return client


def test_what_the_server_wrote_is_shown_escaped_in_the_page_and_the_inbox(
    browser, conversation, asked
):
    # The conversation's card closes with "Allow all 2"; the inbox shows each on its own.
    for url, allows in ((f"/c/{conversation.pk}/", 3), ("/questions/", 2)):
        html = browser.get(url).content.decode()
        assert "Write note &lt;b&gt;now&lt;/b&gt;" in html
        assert "<b>now</b>" not in html
        assert 'aria-label="Write note &lt;b&gt;now&lt;/b&gt;"' in html
        # The tool's description is markdown, rendered and sanitised: no script survives.
        assert "Create or <strong>replace</strong> a note." in html
        assert "<script>alert(1)</script>" not in html
        assert html.count('name="decision" value="allow"') == allows


def test_deciding_in_the_page_costs_a_bounded_number_of_queries(
    browser, conversation, asked, django_assert_max_num_queries
):
    url = f"/c/{conversation.pk}/questions/c0/decide/"
    with django_assert_max_num_queries(10):
        response = browser.post(url, {"decision": "allow"}, headers={"HX-Request": "true"})
    assert response.status_code == 204
    response = browser.post(
        f"/c/{conversation.pk}/questions/c1/decide/",
        {"decision": "allow", "arguments": '{"name": 3, "text": "t"}'},
        headers={"HX-Request": "true"},
    )
    # Shown in the block's alert, translated; nothing was decided.
    assert response.status_code == 422
    assert response.headers["HX-Retarget"] == "#question-c1-alert"
    assert "is not of type" in response.content.decode()
    assert Question.objects.get(tool_call_id="c1").status == QuestionStatus.PENDING


def test_the_tools_page_lists_the_rule_always_allow_made_and_revokes_it(
    browser, user, conversation, asked
):
    decide(user, conversation, asked[0], "always")
    rule = ApprovalRule.objects.get()
    html = browser.get("/settings/tools/").content.decode()
    assert "No MCP servers are set up" in html
    assert "<code>write_note</code>" in html and "name = n0" in html
    response = browser.post(f"/settings/tools/rules/{rule.pk}/revoke/")
    assert response.status_code == 302
    assert not ApprovalRule.objects.filter(user=user).exists()


def ask_to_open(running, url: str) -> None:
    """A running call asks the person to open `url`, stored as sent (elicit_url)."""
    lease, [call] = running("mcp__bank__connect")
    request = ElicitationRequest(
        server="bank", call_id=call.id, message="Sign in to your bank", mode="url", url=url
    )
    asking.ask_elicitation(lease, call, request, key="elicit_url")


def test_a_link_to_open_is_shown_with_its_host_and_opens_only_on_the_persons_click(
    browser, user, conversation, running
):
    ask_to_open(running, "https://login.example.org/authorize?state=<x>")
    html = browser.get(f"/c/{conversation.pk}/").content.decode()
    assert "It asks you to open a page on <strong>login.example.org</strong>" in html
    # As the browser serializes it: the query's < and > percent-encoded.
    assert 'data-open-url="https://login.example.org/authorize?state=%3Cx%3E"' in html
    assert "<x>" not in html
    resolving.answer_elicitation(
        user=user, conversation_id=conversation.pk, tool_call_id="elicit_url", action="accept"
    )
    assert selectors.elicitation_outcome(conversation.pk, "elicit_url") == ("accept", None)


@pytest.mark.parametrize(
    ("sent", "host", "opened"),
    [
        # A backslash ends the host for a browser; Python's urllib read bank.example.
        (
            "https://evil.example\\@bank.example/",
            "evil.example",
            "https://evil.example/@bank.example/",
        ),
        # A Cyrillic a (U+0430): shown as the browser resolves it, not passing for paypal.com.
        ("https://p\u0430ypal.com/login", "xn--pypal-4ve.com", "https://xn--pypal-4ve.com/login"),
        ("HTTPS://Bank.Example:8443/a/../b", "bank.example:8443", "https://bank.example:8443/b"),
    ],
    ids=["backslash", "look-alike", "port"],
)
def test_the_host_shown_is_the_host_the_link_opens(
    browser, conversation, running, sent, host, opened
):
    ask_to_open(running, sent)
    html = browser.get(f"/c/{conversation.pk}/").content.decode()
    assert f"It asks you to open a page on <strong>{host}</strong>:" in html
    assert f'<code class="elicitation-url">{opened}</code>' in html
    assert f'data-open-url="{opened}"' in html


MISLEADING = [
    "javascript:alert(1)",
    "https://bank.example@evil.example/",
    "https://user:secret@bank.example/",
    "https://evil.example/\u202elmth.knab",
    "https://bank.example\u200b.evil.example/",
    "https://bank.example/\u2066x",
]


@pytest.mark.parametrize("url", MISLEADING)
async def test_a_link_that_could_mislead_is_declined_without_asking(url):
    import mcp_types as types

    from chat.engine.turns import Lease
    from mcp_client.connections import Call
    from mcp_client.tools import elicit

    params = types.ElicitRequestURLParams(message="Open this", url=url, elicitation_id="e1")
    call = Call(lease=Lease(conversation_id=1, token=1), call=None, tool="x")
    result = await elicit(call, "evil", params)
    assert result.action == "decline"


def test_a_stored_link_that_could_mislead_is_not_offered(browser, conversation, running):
    ask_to_open(running, "https://bank.example@evil.example/")
    html = browser.get(f"/c/{conversation.pk}/").content.decode()
    assert "It sent a link that Parley does not open" in html
    assert "evil.example" not in html
    assert "data-open-url" not in html


def test_the_admin_shows_each_approval_with_its_decision_and_audit(
    client, django_user_model, user, conversation, asked
):
    decide(user, conversation, asked[0], "allow", arguments='{"name": "new", "text": "t"}')
    decide(user, conversation, asked[1], "deny", feedback="Not <this>")
    staff = django_user_model.objects.create_superuser(username="op", password="pw-op-12345")
    client.force_login(staff)
    html = client.get(f"/admin/chat/conversation/{conversation.pk}/change/").content.decode()
    assert html.count('<span class="parley-kind">Approval</span>') == 2
    assert '<span class="parley-badge">Allowed with edited arguments</span>' in html
    assert '<span class="parley-badge">Denied</span>' in html
    assert "Not &lt;this&gt;" in html
    assert "<dt>Answered via</dt><dd>browser</dd>" in html


HINTED = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "title": "Email", "format": "email"},
        "site": {"type": "string", "title": "Site", "format": "uri"},
        "day": {"type": "string", "title": "Day", "format": "date"},
        "code": {"type": "string", "title": "Code", "minLength": 2, "maxLength": 8},
        "bio": {"type": "string", "title": "Bio", "maxLength": 500},
        "ratio": {"type": "number", "title": "Ratio", "minimum": 0.5},
    },
}


def test_a_forms_fields_say_their_format_and_limits_and_long_text_gets_a_textarea(
    client, user, conversation, running
):
    lease, [call] = running("mcp__notes__new_note_from_form")
    request = ElicitationRequest(
        server="notes", call_id=call.id, message="Tell me", requested_schema=HINTED
    )
    asking.ask_elicitation(lease, call, request, key="elicit_2")
    client.force_login(user)
    html = client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()
    hints = [
        " ".join(h.split())
        for h in re.findall(r'class="question-hint field-limits"[^>]*>(.*?)</p>', html, re.S)
    ]
    assert hints == [
        "An email address.",
        "A web address, such as https://example.com.",
        "A date.",
        "2 to 8 characters.",
        "At most 500 characters.",
        "A number. At least 0.5.",
    ]
    # More than 200 characters allowed: prose, in a textarea; each field is described by its hint.
    assert re.search(
        r'<textarea class="custom-input elicitation-long" id="field-elicit_2-bio"', html
    )
    assert 'aria-describedby="field-elicit_2-code-limits"' in html


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf"])
def test_a_titled_single_choice_is_offered_by_its_titles_and_takes_only_its_values(keyword):
    from questions.answers import form_values
    from questions.payloads import form_fields

    schema = {
        "type": "object",
        "properties": {
            "size": {
                "type": "string",
                "title": "Size",
                keyword: [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            }
        },
        "required": ["size"],
    }
    [field] = form_fields(schema)
    assert field.kind == "enum"
    assert [(c.value, c.title) for c in field.choices] == [("s", "Small"), ("l", "Large")]
    assert form_values([field], {"size": "l"}) == {"size": "l"}
    with pytest.raises(InvalidAnswer):
        form_values([field], {"size": "Large"})


# --- Several choices (an array of a string enum's values) --------------------------------------

PLAIN_ITEMS = {"type": "string", "enum": ["work", "home", "urgent"]}


def titled_items(keyword: str) -> dict:
    return {
        keyword: [
            {"const": "work", "title": "Work"},
            {"const": "home", "title": "Home"},
            {"const": "urgent", "title": "Urgent"},
        ]
    }


def tags_schema(items: dict, **limits) -> dict:
    return {
        "type": "object",
        "properties": {"tags": {"type": "array", "title": "Tags", "items": items, **limits}},
        "required": ["tags"],
    }


@pytest.mark.parametrize(
    ("items", "titles"),
    [
        (PLAIN_ITEMS, ["work", "home", "urgent"]),
        (titled_items("anyOf"), ["Work", "Home", "Urgent"]),
        (titled_items("oneOf"), ["Work", "Home", "Urgent"]),
    ],
)
def test_several_choices_are_offered_by_their_titles_and_sent_as_a_list_of_values(items, titles):
    from questions.answers import form_values
    from questions.payloads import form_fields

    schema = tags_schema(items, minItems=1, maxItems=2, default=["home", "nope", {"x": 1}, "home"])
    [field] = form_fields(schema)
    assert (field.kind, field.label, field.required) == ("array", "Tags", True)
    assert [c.value for c in field.choices] == ["work", "home", "urgent"]
    assert [c.title for c in field.choices] == titles
    assert (field.min_items, field.max_items) == (1, 2)
    assert field.default == ["home"]  # only its own choices, each once
    assert form_values([field], {"tags": ["urgent", "work"]}) == {"tags": ["urgent", "work"]}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "Tags is required."),
        ({"tags": []}, "Tags is required."),
        ({"tags": ["work"]}, "Tags takes at least 2 choices."),
        (
            {"tags": ["work", "home", "urgent", "later"]},
            "later is not one of the choices for Tags.",
        ),
        ({"tags": ["work", "Home"]}, "Home is not one of the choices for Tags."),
        ({"tags": ["work", "work"]}, "work is chosen more than once for Tags."),
        ({"tags": "work"}, "Tags takes a list of its choices."),
        ({"tags": [1, 2]}, "Tags takes a list of its choices."),
        ({"tags": {"work": True}}, "Tags takes a list of its choices."),
    ],
)
def test_several_choices_that_do_not_fit_the_schema_are_refused_naming_the_field(given, message):
    from questions.answers import form_values
    from questions.payloads import form_fields

    fields = form_fields(tags_schema(titled_items("anyOf"), minItems=2, maxItems=3))
    with pytest.raises(InvalidAnswer) as refused:
        form_values(fields, given)
    assert str(refused.value) == message


def test_too_many_choices_are_refused_and_an_optional_empty_one_is_left_out():
    from questions.answers import form_values
    from questions.payloads import form_fields

    schema = tags_schema(PLAIN_ITEMS, maxItems=1)
    schema["required"] = []
    fields = form_fields(schema)
    with pytest.raises(InvalidAnswer) as refused:
        form_values(fields, {"tags": ["work", "home"]})
    assert str(refused.value) == "Tags takes at most 1 choice."
    assert form_values(fields, {"tags": []}) == {}
    assert form_values(fields, {}) == {}


def test_an_array_of_anything_but_string_choices_is_not_offered():
    from questions.payloads import form_fields

    schema = {
        "type": "object",
        "properties": {
            "free": {"type": "array", "items": {"type": "string"}},
            "numbers": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}},
            "bare": {"type": "array"},
        },
    }
    assert form_fields(schema) == []


@pytest.fixture
def tagged(running):
    """A running call asks for a note's name and its tags (1 or 2 of 3, titled)."""
    lease, [call] = running("mcp__notes__new_note_from_form")
    schema = tags_schema(titled_items("anyOf"), minItems=1, maxItems=2, default=["home"])
    schema["properties"] = {
        "name": {"type": "string", "title": "Note name"},
        **schema["properties"],
    }
    request = ElicitationRequest(
        server="notes", call_id=call.id, message="Tag it", requested_schema=schema
    )
    return asking.ask_elicitation(lease, call, request, key="elicit_3")


def test_several_choices_are_a_group_of_checkboxes_in_the_page_and_the_inbox(
    browser, conversation, tagged
):
    for url in (f"/c/{conversation.pk}/", "/questions/"):
        html = browser.get(url).content.decode()
        group = re.search(
            r'<fieldset class="elicitation-choices"[^>]*>(.*?)</fieldset>', html, re.S
        )
        assert 'aria-describedby="field-elicit_3-tags-limits"' in group.group(0)
        legend = re.search(r"<legend[^>]*>(.*?)</legend>", group.group(1), re.S).group(1)
        assert legend.startswith("Tags") and "(required)" in legend
        boxes = re.findall(
            r'<input type="checkbox" name="choices-tags" value="(\w+)"( checked)?> '
            r'<span class="option-label">(\w+)</span>',
            group.group(1),
        )
        assert boxes == [
            ("work", "", "Work"),
            ("home", " checked", "Home"),
            ("urgent", "", "Urgent"),
        ]
        assert re.search(r'id="field-elicit_3-tags-limits">\s*Choose 1 to 2.\s*</p>', html)


def test_the_ticked_boxes_are_sent_as_a_list_and_shown_by_their_titles(
    browser, conversation, tagged
):
    url = reverse("questions:respond", args=[conversation.pk, "elicit_3"])
    data = {"action": "accept", "field-name": "n", "choices-tags": ["work", "home", "urgent"]}
    response = browser.post(url, data, headers={"HX-Request": "true"})
    assert response.status_code == 422
    assert "Tags takes at most 2 choices." in response.content.decode()
    response = browser.post(url, {**data, "choices-tags": []}, headers={"HX-Request": "true"})
    assert "Tags is required." in response.content.decode()
    data["choices-tags"] = ["urgent", "work"]
    assert browser.post(url, data, headers={"HX-Request": "true"}).status_code < 400
    assert selectors.elicitation_outcome(conversation.pk, "elicit_3") == (
        "accept",
        {"name": "n", "tags": ["urgent", "work"]},
    )
    html = browser.get(f"/c/{conversation.pk}/").content.decode()
    assert re.search(r"<dt>Tags</dt><dd>Urgent, Work</dd>", html)
