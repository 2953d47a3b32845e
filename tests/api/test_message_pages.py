"""GET /conversations/{id}/messages pages a transcript with message-id cursors, and
GET /conversations/{id} returns only the newest page: neither grows with the transcript."""

import pytest

from chat import services
from chat.models import Role
from tests.factories import add_message

# Also run on PostgreSQL (make test): the pages' ordering and out-of-range cursors.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

UNKNOWN_BEFORE = "before must be the id of a message in this conversation."


@pytest.fixture
def transcript(conversation) -> list[int]:
    """Ten messages, "m0" to "m9"; their ids in transcript order."""
    return [add_message(conversation.pk, f"m{n}") for n in range(10)]


def page(api, conversation, **params) -> dict:
    response = api.get(f"/conversations/{conversation.pk}/messages", **params)
    assert response.status_code == 200, response.content[:300]
    return response.json()


def texts(data: dict) -> list[str]:
    return [m["text"] for m in data["messages"]]


def test_without_a_cursor_the_newest_messages_in_transcript_order(api, conversation, transcript):
    data = page(api, conversation, limit=3)
    assert texts(data) == ["m7", "m8", "m9"]
    assert [m["order"] for m in data["messages"]] == [7, 8, 9]
    assert (data["before"], data["after"]) == (transcript[7], None)


def test_before_gives_the_messages_just_older(api, conversation, transcript):
    data = page(api, conversation, before=transcript[7], limit=3)
    assert texts(data) == ["m4", "m5", "m6"]
    assert (data["before"], data["after"]) == (transcript[4], transcript[6])
    first = page(api, conversation, before=transcript[2], limit=3)
    assert texts(first) == ["m0", "m1"]
    assert (first["before"], first["after"]) == (None, transcript[1])


def test_after_gives_the_messages_just_newer(api, conversation, transcript):
    data = page(api, conversation, after=transcript[2], limit=3)
    assert texts(data) == ["m3", "m4", "m5"]
    assert (data["before"], data["after"]) == (transcript[3], transcript[5])
    last = page(api, conversation, after=transcript[7], limit=3)
    assert texts(last) == ["m8", "m9"]
    assert (last["before"], last["after"]) == (transcript[8], None)


def test_following_the_cursors_reads_the_whole_transcript_once_each_way(
    api, conversation, transcript
):
    backwards, data = [], page(api, conversation, limit=4)
    while True:
        backwards = texts(data) + backwards
        if data["before"] is None:
            break
        data = page(api, conversation, before=data["before"], limit=4)
    assert backwards == [f"m{n}" for n in range(10)]

    forwards, data = [], page(api, conversation, before=transcript[3], limit=4)
    while True:
        forwards += texts(data)
        if data["after"] is None:
            break
        data = page(api, conversation, after=data["after"], limit=4)
    assert forwards == [f"m{n}" for n in range(10)]


def test_an_empty_page_has_no_cursors(api, conversation, transcript):
    assert page(api, conversation, after=transcript[9]) == {
        "messages": [],
        "before": None,
        "after": None,
    }
    assert page(api, conversation, before=transcript[0])["before"] is None
    empty = services.create_conversation(owner=conversation.owner, title="empty")
    assert page(api, empty) == {"messages": [], "before": None, "after": None}


def test_the_default_page_is_100_messages(api, conversation):
    ids = [add_message(conversation.pk, f"m{n}") for n in range(105)]
    data = page(api, conversation)
    assert texts(data) == [f"m{n}" for n in range(5, 105)]
    assert data["before"] == ids[5]


def test_pages_follow_the_transcript_order_not_the_message_ids(api, conversation):
    # Created in the order 2, 0, 1: the ids do not follow the transcript.
    made = {}
    for order in (2, 0, 1):
        made[order] = conversation.messages.create(
            role=Role.ASSISTANT,
            order=order,
            blocks=[{"type": "text", "text": f"m{order}"}],
            created_seq=1,
            seq=1,
        ).pk
    data = page(api, conversation, limit=2)
    assert texts(data) == ["m1", "m2"]
    assert data["before"] == made[1]
    assert texts(page(api, conversation, before=made[1])) == ["m0"]
    assert texts(page(api, conversation, after=made[0])) == ["m1", "m2"]


def test_superseded_messages_are_in_the_pages_marked(api, conversation, user, committed):
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="hello")
    with committed():
        services.regenerate_reply(user=user, conversation_id=conversation.pk)
    data = page(api, conversation, limit=2)
    assert [(m["role"], m["superseded"]) for m in data["messages"]] == [
        ("assistant", True),
        ("assistant", False),
    ]
    older = page(api, conversation, before=data["before"])
    assert [(m["role"], m["superseded"]) for m in older["messages"]] == [("user", False)]


def test_another_users_conversation_is_404(api, other_user):
    theirs = services.create_conversation(owner=other_user, title="theirs")
    message_id = add_message(theirs.pk, "secret")
    for params in [{}, {"before": message_id}, {"after": message_id}]:
        response = api.get(f"/conversations/{theirs.pk}/messages", **params)
        assert response.status_code == 404
        assert response.json() == {"message": "That conversation does not exist."}


def test_a_cursor_that_is_not_a_message_of_this_conversation_is_422(
    api, user, conversation, transcript
):
    other = services.create_conversation(owner=user, title="mine too")
    elsewhere = add_message(other.pk, "elsewhere")
    for missing in [elsewhere, max(transcript) + 1000]:
        response = api.get(f"/conversations/{conversation.pk}/messages", before=missing)
        assert response.status_code == 422
        assert response.json() == {"message": UNKNOWN_BEFORE}
    response = api.get(f"/conversations/{conversation.pk}/messages", after=elsewhere)
    assert response.json() == {"message": "after must be the id of a message in this conversation."}


def test_before_and_after_together_are_422(api, conversation, transcript):
    response = api.get(
        f"/conversations/{conversation.pk}/messages", before=transcript[5], after=transcript[1]
    )
    assert response.status_code == 422
    assert response.json() == {"message": "Pass before or after, not both."}


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 501},
        {"limit": "ten"},
        {"limit": "9" * 5000},
        {"before": 0},
        {"before": -1},
        {"before": "x"},
        {"after": "9" * 5000},
        {"after": 2**63},
        {"after": "1.5"},
    ],
)
def test_bad_limits_and_cursors_are_422_not_500(api, conversation, transcript, params):
    response = api.get(f"/conversations/{conversation.pk}/messages", **params)
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert body["message"] == "The request is not valid."
    assert body["errors"]


def test_limit_500_is_allowed(api, conversation, transcript):
    assert texts(page(api, conversation, limit=500)) == [f"m{n}" for n in range(10)]


def test_a_conversation_comes_with_its_newest_100_messages_and_the_cursor_to_older(
    api, conversation
):
    ids = [add_message(conversation.pk, f"m{n}") for n in range(130)]
    detail = api.get(f"/conversations/{conversation.pk}").json()
    assert texts(detail) == [f"m{n}" for n in range(30, 130)]
    assert detail["messagesBefore"] == ids[30]
    older = page(api, conversation, before=detail["messagesBefore"])
    assert texts(older) == [f"m{n}" for n in range(30)]
    assert older["before"] is None


def test_a_short_conversation_comes_whole_without_a_cursor(api, conversation, transcript):
    detail = api.get(f"/conversations/{conversation.pk}").json()
    assert texts(detail) == [f"m{n}" for n in range(10)]
    assert detail["messagesBefore"] is None


def test_the_openapi_document_describes_the_pages(client):
    schema = client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/conversations/{conversation_id}/messages"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert {"before", "after", "limit"} <= set(parameters)
    assert parameters["limit"]["schema"]["maximum"] == 500
    assert parameters["limit"]["schema"]["default"] == 100
    assert "older" in parameters["before"]["description"]
    assert "422" in operation["description"]
    schemas = schema["components"]["schemas"]
    assert {"messages", "before", "after"} <= set(schemas["MessagePage"]["required"])
    assert "?before=" in schemas["MessagePage"]["properties"]["before"]["description"]
    detail = schemas["ConversationDetail"]["properties"]
    assert "at most 100" in detail["messages"]["description"]
    assert "?before=" in detail["messagesBefore"]["description"]


# The sub-agents run while the parent's turn waits for them: their commits must be real.
@pytest.mark.django_db(transaction=True)
def test_children_stay_marked_superseded_when_their_call_is_older_than_the_page(
    api, conversation, user
):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    services.regenerate_reply(user=user, conversation_id=conversation.pk)
    for n in range(100):
        add_message(conversation.pk, f"later {n}")
    detail = api.get(f"/conversations/{conversation.pk}").json()
    # The spawn_agents calls, superseded or not, are older than the page.
    assert texts(detail) == [f"later {n}" for n in range(100)]
    assert [(c["number"], c["superseded"]) for c in detail["children"]] == [
        (1, True),
        (2, True),
        (1, False),
        (2, False),
    ]
