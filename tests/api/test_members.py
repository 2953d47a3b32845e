"""Sharing through the JSON API: /conversations/{id}/members, as the Share panel does it. The
owner alone changes who is in; every member reads who is; a stranger finds nothing."""

import pytest
from django.test import Client

from api.tokens import create_token
from chat import services
from chat.errors import OWNER_ONLY, VIEWER_REFUSED
from chat.selectors import role_of

# Also run on PostgreSQL (make test).
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


class Caller:
    """The JSON API as one user calls it with their token."""

    def __init__(self, user) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {create_token(user=user, name='t')[1]}"}

    def members(self, conversation_id: int):
        return self.client.get(
            f"/api/v1/conversations/{conversation_id}/members", headers=self.headers
        )

    def put(self, conversation_id: int, username: str, body: object):
        return self.client.put(
            f"/api/v1/conversations/{conversation_id}/members/{username}",
            body,
            content_type="application/json",
            headers=self.headers,
        )

    def delete(self, conversation_id: int, username: str):
        return self.client.delete(
            f"/api/v1/conversations/{conversation_id}/members/{username}", headers=self.headers
        )

    def send(self, conversation_id: int, text: str):
        return self.client.post(
            f"/api/v1/conversations/{conversation_id}/messages",
            {"content": text},
            content_type="application/json",
            headers=self.headers,
        )


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob")


@pytest.fixture
def vera(django_user_model):
    return django_user_model.objects.create_user(username="vera")


def listed(response) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.content
    return [(m["username"], m["role"]) for m in response.json()]


def test_the_owner_shares_changes_a_role_and_removes_through_the_api(conversation, user, bob):
    owner = Caller(user)
    assert listed(owner.members(conversation.pk)) == [("ada", "owner")]
    assert listed(owner.put(conversation.pk, "bob", {"role": "viewer"})) == [
        ("ada", "owner"),
        ("bob", "viewer"),
    ]
    assert role_of(user=bob, conversation_id=conversation.pk) == "viewer"
    # A second PUT changes the role; it never adds the person twice.
    assert listed(owner.put(conversation.pk, "bob", {"role": "participant"})) == [
        ("ada", "owner"),
        ("bob", "participant"),
    ]
    assert listed(owner.delete(conversation.pk, "bob")) == [("ada", "owner")]
    assert role_of(user=bob, conversation_id=conversation.pk) is None


def test_a_participant_added_through_the_api_can_write_and_a_viewer_cannot(
    conversation, user, bob, vera
):
    owner = Caller(user)
    owner.put(conversation.pk, "bob", {"role": "participant"})
    owner.put(conversation.pk, "vera", {"role": "viewer"})
    assert Caller(bob).send(conversation.pk, "Bob here").status_code == 200
    refused = Caller(vera).send(conversation.pk, "Vera here")
    assert refused.status_code == 403
    assert refused.json() == {"message": str(VIEWER_REFUSED)}
    # Every member reads who is in it.
    assert listed(Caller(vera).members(conversation.pk)) == [
        ("ada", "owner"),
        ("bob", "participant"),
        ("vera", "viewer"),
    ]


def test_only_the_owner_changes_who_is_in(conversation, user, bob, vera):
    owner = Caller(user)
    owner.put(conversation.pk, "bob", {"role": "participant"})
    participant = Caller(bob)
    for response in (
        participant.put(conversation.pk, "vera", {"role": "viewer"}),
        participant.delete(conversation.pk, "bob"),
    ):
        assert response.status_code == 403
        assert response.json() == {"message": str(OWNER_ONLY)}
    assert listed(owner.members(conversation.pk)) == [("ada", "owner"), ("bob", "participant")]


def test_a_stranger_finds_nothing(conversation, other_user):
    stranger = Caller(other_user)
    for response in (
        stranger.members(conversation.pk),
        stranger.put(conversation.pk, other_user.username, {"role": "participant"}),
        stranger.delete(conversation.pk, "ada"),
    ):
        assert response.status_code == 404
        assert response.json() == {"message": "That conversation does not exist."}
    assert role_of(user=other_user, conversation_id=conversation.pk) is None


def test_bad_requests_say_what_is_wrong_and_change_nothing(conversation, user, bob):
    owner = Caller(user)
    unknown = owner.put(conversation.pk, "nobody", {"role": "viewer"})
    assert (unknown.status_code, unknown.json()) == (
        400,
        {"message": "There is no user called “nobody”."},
    )
    itself = owner.put(conversation.pk, "ada", {"role": "viewer"})
    assert (itself.status_code, itself.json()) == (
        400,
        {"message": "You own this conversation already."},
    )
    not_in = owner.delete(conversation.pk, "bob")
    assert (not_in.status_code, not_in.json()) == (
        400,
        {"message": "That person is no longer a member of this conversation."},
    )
    for body in ({"role": "owner"}, {"role": ""}, {}, ["viewer"]):
        assert owner.put(conversation.pk, "bob", body).status_code == 422, body
    assert listed(owner.members(conversation.pk)) == [("ada", "owner")]


def test_a_sub_agents_conversation_has_no_members_of_its_own(conversation, user):
    child = services.create_conversation(owner=user)
    child.parent = conversation
    child.save(update_fields=["parent"])
    assert Caller(user).members(child.pk).status_code == 404


def test_a_username_with_a_nul_is_no_user(conversation, user):
    response = Caller(user).put(conversation.pk, "bo%00b", {"role": "viewer"})
    assert (response.status_code, response.json()) == (
        400,
        {"message": "There is no user called “bo\ufffdb”."},
    )
    assert Caller(user).delete(conversation.pk, "bo%00b").status_code == 400
