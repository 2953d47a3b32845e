"""Shared conversations: the owner adds participants and viewers; every read and write checks
the role in one place (chat.selectors.conversation_for_user); a stranger finds nothing."""

import pytest
from django.test import Client
from django.urls import reverse

from chat import services, sharing
from chat.errors import OWNER_ONLY, VIEWER_REFUSED, ConversationNotFound, NotAllowed
from chat.models import MemberRole, Membership, Role
from chat.selectors import (
    Need,
    conversation_for_user,
    conversations_for_user,
    role_of,
    waiting_conversation_ids,
)
from chat.sharing import NO_SUCH_USER, NOT_THE_OWNER, SharingRefused
from core import events

# Also run on PostgreSQL (make test): the role is read by subqueries each backend plans.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def vera(django_user_model):
    return django_user_model.objects.create_user(username="vera", password="pw-vera-123")


@pytest.fixture
def shared(conversation, user, bob, vera, committed):
    """`conversation` (ada's) shared with bob as a participant and vera as a viewer."""
    with committed():
        sharing.share_conversation(
            user=user, conversation_id=conversation.pk, username="bob", role="participant"
        )
        sharing.share_conversation(
            user=user, conversation_id=conversation.pk, username="vera", role="viewer"
        )
    return conversation


def test_each_person_has_their_role_and_a_stranger_none(shared, user, bob, vera, other_user):
    assert role_of(user=user, conversation_id=shared.pk) == "owner"
    assert role_of(user=bob, conversation_id=shared.pk) == MemberRole.PARTICIPANT
    assert role_of(user=vera, conversation_id=shared.pk) == MemberRole.VIEWER
    assert role_of(user=other_user, conversation_id=shared.pk) is None


def test_members_see_the_shared_conversation_in_their_list(shared, bob, vera, other_user):
    assert list(conversations_for_user(user=bob)) == [shared]
    assert list(conversations_for_user(user=vera)) == [shared]
    assert list(conversations_for_user(user=other_user)) == []


def test_a_stranger_gets_not_found_whatever_they_want(shared, other_user):
    for need in Need:
        with pytest.raises(ConversationNotFound):
            conversation_for_user(user=other_user, conversation_id=shared.pk, need=need)


def test_a_viewer_reads_but_may_not_act_nor_manage(shared, vera):
    assert conversation_for_user(user=vera, conversation_id=shared.pk).pk == shared.pk
    with pytest.raises(NotAllowed) as refused:
        conversation_for_user(user=vera, conversation_id=shared.pk, lock=True)
    assert refused.value.message == VIEWER_REFUSED
    assert refused.value.status == 403


def test_a_participant_acts_but_only_the_owner_manages(shared, bob):
    conversation_for_user(user=bob, conversation_id=shared.pk, lock=True)
    with pytest.raises(NotAllowed) as refused:
        services.rename_conversation(user=bob, conversation_id=shared.pk, title="Mine now")
    assert refused.value.message == OWNER_ONLY
    with pytest.raises(NotAllowed):
        services.delete_conversation(user=bob, conversation_id=shared.pk)
    with pytest.raises(NotAllowed):
        sharing.share_conversation(
            user=bob, conversation_id=shared.pk, username="mallory", role="viewer"
        )


def test_a_participant_writes_under_their_own_name(shared, bob, post):
    message = post(bob, shared, "Hello from Bob")
    assert message.author == bob
    assert message.role == Role.USER


def test_a_viewer_cannot_send_and_nothing_is_written(shared, vera):
    with pytest.raises(NotAllowed):
        services.post_user_message(user=vera, conversation_id=shared.pk, text="Let me in")
    assert not shared.messages.exists()


def test_sharing_with_an_unknown_user_or_the_owner_is_refused(conversation, user):
    with pytest.raises(SharingRefused) as refused:
        sharing.share_conversation(
            user=user, conversation_id=conversation.pk, username="nobody", role="viewer"
        )
    assert refused.value.message == NO_SUCH_USER % {"name": "nobody"}
    with pytest.raises(SharingRefused) as refused:
        sharing.share_conversation(
            user=user, conversation_id=conversation.pk, username="ada", role="viewer"
        )
    assert refused.value.message == NOT_THE_OWNER


def test_sharing_again_changes_the_role(shared, user, bob, committed):
    with committed():
        sharing.share_conversation(
            user=user, conversation_id=shared.pk, username="bob", role="viewer"
        )
    assert Membership.objects.get(conversation=shared, user=bob).role == MemberRole.VIEWER
    assert Membership.objects.filter(conversation=shared).count() == 2


def test_removing_a_member_tells_their_sockets(shared, user, bob, monkeypatch, committed):
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(events, "send", lambda group, event: sent.append((group, event)))
    with committed():
        sharing.remove_member(user=user, conversation_id=shared.pk, member_id=bob.pk)
    assert (events.user_group(bob.pk), events.access_changed(bob.pk, shared.pk)) in sent
    with pytest.raises(ConversationNotFound):
        conversation_for_user(user=bob, conversation_id=shared.pk)


def test_a_waiting_shared_conversation_waits_for_participants_not_viewers(
    shared, user, bob, vera, model, post
):
    model.asks()
    post(user, shared, "Lunch?")
    assert waiting_conversation_ids(user=bob) == {shared.pk}
    assert waiting_conversation_ids(user=vera) == set()


# --- Through HTTP and the websocket ------------------------------------------------------------


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_shares_from_the_page(conversation, user, bob):
    client = logged_in(user)
    response = client.post(
        reverse("chat:share", args=[conversation.pk]),
        {"username": "bob", "role": "viewer"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert "bob" in response.text and "Remove" in response.text
    assert role_of(user=bob, conversation_id=conversation.pk) == MemberRole.VIEWER


def test_a_refused_share_says_why_in_the_panel_and_keeps_the_username(conversation, user):
    client = logged_in(user)
    response = client.post(
        reverse("chat:share", args=[conversation.pk]),
        {"username": "nobody", "role": "viewer"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    assert 'id="share-error" role="alert">There is no user called' in response.text
    assert 'value="nobody"' in response.text


def test_a_username_with_a_nul_from_the_page_is_no_user(conversation, user):
    # On PostgreSQL, a NUL in a query's text is an error of the database's own.
    response = logged_in(user).post(
        reverse("chat:share", args=[conversation.pk]),
        {"username": "bo\x00b", "role": "viewer"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    assert "There is no user called “bo\ufffdb”." in response.text
    assert not conversation.memberships.exists()


def test_a_viewer_sending_from_the_page_gets_an_alert(shared, vera):
    client = logged_in(vera)
    response = client.post(
        reverse("chat:post_message", args=[shared.pk]), {"text": "hi"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 403
    assert "only read this conversation" in response.text


def test_a_stranger_gets_404_on_the_page_and_the_api(shared, other_user):
    client = logged_in(other_user)
    assert client.get(reverse("chat:conversation_detail", args=[shared.pk])).status_code == 404
    assert client.get(f"/api/v1/conversations/{shared.pk}").status_code == 404
    assert client.get(f"/api/v1/conversations/{shared.pk}/messages").status_code == 404


def test_a_viewer_gets_a_403_with_a_clear_message_from_the_api(shared, vera):
    client = logged_in(vera)
    assert client.get(f"/api/v1/conversations/{shared.pk}").status_code == 200
    response = client.post(
        f"/api/v1/conversations/{shared.pk}/messages",
        {"content": "hi"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert response.json() == {"message": str(VIEWER_REFUSED)}


def test_a_member_sees_who_wrote_each_message(shared, user, bob, post):
    post(bob, shared, "Bob was here")
    page = logged_in(user).get(reverse("chat:conversation_detail", args=[shared.pk])).text
    assert '<h2 class="message-author">bob</h2>' in page


def test_the_api_lists_shared_conversations_with_the_callers_role(shared, user, vera):
    listed = logged_in(vera).get("/api/v1/conversations").json()
    assert [(c["id"], c["role"]) for c in listed] == [(shared.pk, "viewer")]
    own = logged_in(user).get(f"/api/v1/conversations/{shared.pk}").json()
    assert own["role"] == "owner"


def test_a_viewers_page_offers_reading_only(shared, user, vera, post):
    post(user, shared, "Hello")
    page = logged_in(vera).get(reverse("chat:conversation_detail", args=[shared.pk])).text
    assert "You are a viewer of this conversation" in page
    assert 'aria-label="Copy message"' in page
    assert 'aria-label="Edit message"' not in page
    assert 'aria-label="Regenerate reply"' not in page
    assert 'id="composer-text"' not in page
    assert ">Share<" not in page
    owner_page = logged_in(user).get(reverse("chat:conversation_detail", args=[shared.pk])).text
    assert 'aria-label="Edit message"' in owner_page
    assert ">Share<" in owner_page


# What the owner alone may do from the page: (url name, form, whether the sidebar's menu has it).
OWNER_ACTIONS = {
    "rename": ("chat:conversation_rename", {"title": "Mine now"}, True),
    "pin": ("chat:conversation_pin", {"pinned": "1"}, True),
    "delete": ("chat:conversation_delete", {}, True),
    "share": ("chat:share", {"username": "mallory", "role": "participant"}, False),
    "unshare": ("chat:unshare", {}, False),
}


def owner_only_url(name: str, conversation, member) -> str:
    args = [conversation.pk, member.pk] if name == "chat:unshare" else [conversation.pk]
    return reverse(name, args=args)


@pytest.mark.parametrize("member", ["bob", "vera"], ids=["participant", "viewer"])
@pytest.mark.parametrize("action", OWNER_ACTIONS)
def test_owner_only_actions_are_refused_to_members_with_403_in_the_pages_alert(
    shared, other_user, member, action, request
):
    name, form, in_sidebar = OWNER_ACTIONS[action]
    client = logged_in(request.getfixturevalue(member))
    url = owner_only_url(name, shared, request.getfixturevalue("bob"))
    page = reverse("chat:conversation_detail", args=[shared.pk])
    alert = f'<p id="composer-error" class="form-error" role="alert">{OWNER_ONLY}</p>'

    # From the page (htmx): the refusal goes into the page's alert, as other refusals do.
    for sent in [form, {**form, "from": "sidebar"}] if in_sidebar else [form]:
        refused = client.post(
            url, sent, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=f"http://testserver{page}"
        )
        assert refused.status_code == 403
        assert (refused["HX-Retarget"], refused["HX-Reswap"]) == ("#composer-error", "innerHTML")
        assert refused.text == str(OWNER_ONLY)
    assert '<p id="composer-error" class="form-error" role="alert"></p>' in client.get(page).text

    # Without JavaScript: the conversation's page, the refusal in its alert.
    refused = client.post(url, form)
    assert refused.status_code == 403
    assert alert in refused.text

    shared.refresh_from_db()
    assert (shared.title, shared.pinned, shared.deleted_at) == ("First chat", False, None)
    assert sorted(shared.memberships.values_list("user__username", "role")) == [
        ("bob", MemberRole.PARTICIPANT),
        ("vera", MemberRole.VIEWER),
    ]
