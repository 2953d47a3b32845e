"""Query budgets: how many SQL statements each flow a person starts may cost, end to end
(middleware, view, service), so that a change that adds a query to a hot path is a decision,
not an accident. docs/developers/query-budgets.md gives the reason for each budget."""

import asyncio

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.test import Client
from django.urls import reverse

from api.tokens import create_token
from chat import services
from chat.blocks import TextBlock
from chat.engine import dispatch
from chat.engine.runner import Runner
from chat.models import Conversation, Role
from chat.transcript import Transcript, lock
from questions import approvals
from questions.models import ApprovalRule, Question
from tests.factories import add_message

# Also run on PostgreSQL (make test): the statements each flow costs, on each backend.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# The budgets (docs/developers/query-budgets.md).
SEND_MESSAGE = {"this process": 12, "a worker": 10}
START_CONVERSATION = {"this process": 15, "a worker": 13}
SIDEBAR_ACTION = 8
ANSWER_QUESTION = {"this process": 12, "a worker": 10}
OPEN_CONVERSATION = 9
LOAD_EARLIER = 5
API_CONVERSATION = 4
API_PAGE_OF_MESSAGES = 4
SHARE = 14
ASSIGN_QUESTION = 11
OPEN_SHARED_CONVERSATION = 10
API_MEMBERS = 4
ADMIN_TRANSCRIPT = {"the conversation's page": 7, "a page of earlier messages": 5}
# The rules' verdict on one MCP call: no rule decides, or a kept rule does (its use counted).
RULES_VERDICT = {"no rule decides": 1, "a kept rule decides": 2}


@pytest.fixture
def browser(client: Client, user) -> Client:
    client.force_login(user)
    client.get(reverse("chat:conversation_list"))  # the session is in the cache from here on
    return client


@pytest.fixture(params=["this process", "a worker"])
def turns_run_in(request, dispatched, monkeypatch):
    """Where the turn a flow starts runs: in this process (the default: one server and no
    Redis; the flow's own transaction claims the turn and reads its first request's history)
    or in a worker (REDIS_URL: the turn is queued)."""
    if request.param == "a worker":
        yield request.param
        return
    loop = asyncio.new_event_loop()  # never run: the turn is claimed, not run
    monkeypatch.setattr(dispatch, "_local", Runner(loop))
    yield request.param
    loop.close()


@pytest.fixture
def asked(conversation, user, model, committed):
    """The agent asked a question in `conversation` and waits for its answer."""
    model.asks()
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    return Question.objects.get(conversation=conversation)


def test_sending_a_message(browser, conversation, turns_run_in, django_assert_max_num_queries):
    url = reverse("chat:post_message", args=[conversation.pk])
    with django_assert_max_num_queries(SEND_MESSAGE[turns_run_in]):
        response = browser.post(url, {"text": "hello"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert conversation.messages.filter(role=Role.USER).count() == 1


def test_starting_a_conversation(browser, user, turns_run_in, django_assert_max_num_queries):
    url = reverse("chat:conversation_create")
    with django_assert_max_num_queries(START_CONVERSATION[turns_run_in]):
        response = browser.post(url, {"text": "hello"})
    assert response.status_code == 302
    assert Conversation.objects.get(owner=user).messages.filter(role=Role.USER).count() == 1


@pytest.mark.parametrize("action", ["conversation_pin", "conversation_delete"])
def test_a_sidebar_action(browser, user, action, django_assert_max_num_queries):
    for index in range(30):
        Conversation.objects.create(owner=user, title=f"Chat {index}")
    conversation = Conversation.objects.create(owner=user, title="This one")
    url = reverse(f"chat:{action}", args=[conversation.pk])
    with django_assert_max_num_queries(SIDEBAR_ACTION):
        response = browser.post(url, {"from": "sidebar", "pinned": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "Chat 0" in response.content.decode()


def test_answering_a_question(browser, asked, turns_run_in, django_assert_max_num_queries):
    url = reverse("questions:answer", args=[asked.conversation_id, asked.tool_call_id])
    with django_assert_max_num_queries(ANSWER_QUESTION[turns_run_in]):
        response = browser.post(url, {"q0": "Pepperoni"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204
    asked.refresh_from_db()
    assert asked.status == "answered"


@pytest.fixture
def teammates(django_user_model) -> list:
    return [django_user_model.objects.create_user(username=f"mate{index}") for index in range(3)]


@pytest.mark.parametrize("waiting", [False, True], ids=["nothing waits", "a question waits"])
def test_sharing_a_conversation(
    request, browser, conversation, teammates, waiting, django_assert_max_num_queries
):
    """The same while a question waits: its card is pushed again after commit, and no
    message is written for it."""
    if waiting:
        request.getfixturevalue("asked")
    for mate in teammates[:2]:
        browser.post(
            reverse("chat:share", args=[conversation.pk]),
            {"username": mate.username, "role": "viewer"},
            HTTP_HX_REQUEST="true",
        )
    url = reverse("chat:share", args=[conversation.pk])
    with django_assert_max_num_queries(SHARE):
        response = browser.post(
            url, {"username": "mate2", "role": "participant"}, HTTP_HX_REQUEST="true"
        )
    assert response.status_code == 200
    assert "mate2" in response.content.decode()


def test_assigning_a_question(browser, asked, teammates, committed, django_assert_max_num_queries):
    from chat import sharing

    with committed():
        for mate in teammates:
            sharing.share_conversation(
                user=asked.conversation.owner,
                conversation_id=asked.conversation_id,
                username=mate.username,
                role="participant",
            )
    url = reverse("questions:assign", args=[asked.conversation_id, asked.tool_call_id])
    with django_assert_max_num_queries(ASSIGN_QUESTION):
        response = browser.post(url, {"assignee": teammates[1].pk}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204
    asked.refresh_from_db()
    assert asked.assigned_to == teammates[1]


def test_opening_a_shared_conversation_costs_what_its_members_do_not_multiply(
    client, conversation, user, teammates, committed, django_assert_max_num_queries
):
    from chat import sharing

    with committed():
        for mate in teammates:
            sharing.share_conversation(
                user=user, conversation_id=conversation.pk, username=mate.username, role="viewer"
            )
    many_messages(conversation, 20)
    client.force_login(teammates[0])
    url = reverse("chat:conversation_detail", args=[conversation.pk])
    client.get(url)
    with django_assert_max_num_queries(OPEN_SHARED_CONVERSATION):
        response = client.get(url)
    assert response.status_code == 200


def many_messages(conversation, length: int) -> None:
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        for index in range(length // 2):
            transcript.append(role=Role.USER, blocks=[TextBlock(text=f"question {index}")])
            transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text=f"answer {index}")])


@pytest.mark.parametrize("length", [10, 1_000])
def test_loading_earlier_messages_does_not_cost_more_with_the_length(
    browser, conversation, length, django_assert_max_num_queries
):
    many_messages(conversation, length)
    url = reverse("chat:earlier_messages", args=[conversation.pk])
    with django_assert_max_num_queries(LOAD_EARLIER):
        response = browser.get(url, {"before": length - 100})
    assert response.status_code == 200


@pytest.mark.parametrize("length", [10, 1_000])
def test_opening_a_conversation_does_not_cost_more_with_its_length(
    browser, conversation, length, django_assert_max_num_queries
):
    many_messages(conversation, length)
    url = reverse("chat:conversation_detail", args=[conversation.pk])
    with django_assert_max_num_queries(OPEN_CONVERSATION):
        response = browser.get(url)
    assert response.status_code == 200
    assert f"answer {length // 2 - 1}" in response.content.decode()


@pytest.fixture
def long(request, conversation) -> list[int]:
    """The conversation with `request.param` messages; their ids."""
    ids = []
    for index in range(request.param // 2):
        ids.append(add_message(conversation.pk, f"question {index}", role=Role.USER))
        ids.append(add_message(conversation.pk, f"answer {index}"))
    return ids


@pytest.fixture
def bearer(client: Client, user) -> dict:
    headers = {"Authorization": f"Bearer {create_token(user=user, name='budget')[1]}"}
    client.get("/api/v1/conversations", headers=headers)  # the token's last use is recorded
    return headers


@pytest.mark.parametrize("long", [10, 300], indirect=True)
def test_the_api_conversation_does_not_cost_more_with_its_length(
    client, bearer, conversation, long, django_assert_max_num_queries
):
    with django_assert_max_num_queries(API_CONVERSATION):
        response = client.get(f"/api/v1/conversations/{conversation.pk}", headers=bearer)
    assert response.status_code == 200
    assert response.json()["messages"][-1]["id"] == long[-1]


@pytest.mark.parametrize("long", [10, 300], indirect=True)
@pytest.mark.parametrize("cursor", ["none", "before", "after"])
def test_a_page_of_messages_does_not_cost_more_with_the_length(
    client, bearer, conversation, long, cursor, django_assert_max_num_queries
):
    place = {"none": {}, "before": {"before": long[-1]}, "after": {"after": long[0]}}[cursor]
    url = f"/api/v1/conversations/{conversation.pk}/messages"
    with django_assert_max_num_queries(API_PAGE_OF_MESSAGES):
        response = client.get(url, place, headers=bearer)
    assert response.status_code == 200
    assert len(response.json()["messages"]) == min(len(long) - 1 if place else len(long), 100)


def test_the_api_lists_members_at_one_cost_whatever_their_number(
    client, bearer, conversation, user, teammates, committed, django_assert_max_num_queries
):
    from chat import sharing

    with committed():
        for mate in teammates:
            sharing.share_conversation(
                user=user, conversation_id=conversation.pk, username=mate.username, role="viewer"
            )
    with django_assert_max_num_queries(API_MEMBERS):
        response = client.get(f"/api/v1/conversations/{conversation.pk}/members", headers=bearer)
    assert response.status_code == 200
    assert [m["username"] for m in response.json()] == ["ada", "mate0", "mate1", "mate2"]


@pytest.fixture
def operator(client: Client, django_user_model) -> Client:
    staff = django_user_model.objects.create_superuser(username="op", password="pw-op-12345")
    client.force_login(staff)
    client.get(reverse("admin:index"))  # the session is in the cache from here on
    # Django keeps content types for the life of the process; the change page reads this one.
    ContentType.objects.get_for_model(Conversation)
    return client


@pytest.mark.parametrize("long", [10, 300], indirect=True)
@pytest.mark.parametrize("page", list(ADMIN_TRANSCRIPT))
def test_the_admin_transcript_does_not_cost_more_with_its_length(
    operator, conversation, long, page, django_assert_max_num_queries
):
    if page == "a page of earlier messages":
        url = reverse("admin:chat_conversation_transcript", args=[conversation.pk])
        place = {"before": len(long) - 1}
    else:
        url, place = reverse("admin:chat_conversation_change", args=[conversation.pk]), {}
    with django_assert_max_num_queries(ADMIN_TRANSCRIPT[page]):
        response = operator.get(url, place)
    assert response.status_code == 200
    html = response.content.decode()
    assert f">question {len(long) // 2 - 1}<" in html
    assert (">question 0<" in html) == (len(long) < 100)  # a page, not the whole transcript


@pytest.mark.parametrize("rules", [3, 60])
@pytest.mark.parametrize("case", list(RULES_VERDICT))
def test_the_rules_verdict_on_a_call_does_not_cost_more_with_the_number_of_rules(
    user, conversation, rules, case, django_assert_max_num_queries
):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Notes")
    ApprovalRule.objects.bulk_create(
        ApprovalRule(
            scope="user",
            user=user,
            server="notes",
            tool="write_note",
            effect="allow",
            match={"name": f"other-{n}"},
        )
        for n in range(rules)
    )
    ApprovalRule.objects.bulk_create(
        ApprovalRule(scope="deployment", tool=f"tool_{n}", effect="deny") for n in range(rules)
    )
    if case == "a kept rule decides":
        ApprovalRule.objects.create(
            scope="user", user=user, server="notes", tool="write_note", effect="allow"
        )
    with django_assert_max_num_queries(RULES_VERDICT[case]):
        verdict = approvals.verdict_for(
            conversation.pk,
            server="notes",
            tool="write_note",
            arguments={"name": "shopping"},
            default="ask",
        )
    assert verdict.effect == ("allow" if case == "a kept rule decides" else "ask")


def test_a_steps_batch_card_costs_the_same_whatever_the_number_of_calls(browser, user):
    """The batch card ("Allow all N") reads only the blocks the page has: opening a
    conversation whose step waits on 5 approvals costs what one waiting on 2 does."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.api.tool_requests import ask_approvals, write_call

    costs = {}
    for count in (2, 5):
        conversation = services.create_conversation(owner=user, title=f"{count} calls")
        calls = [write_call(f"w{n}", name=f"n{n}", text="t") for n in range(count)]
        ask_approvals(conversation.pk, *calls)
        with CaptureQueriesContext(connection) as queries:
            page = browser.get(reverse("chat:conversation_detail", args=[conversation.pk]))
        assert f"Allow all {count}" in page.content.decode()
        costs[count] = len(queries)
    assert costs[2] == costs[5]
