import pytest

from chat import selectors, services
from chat.blocks import TextBlock, parse_blocks
from chat.engine import dispatch
from chat.errors import (
    AgentBusy,
    ConversationNotFound,
    EmptyMessage,
    MessageTooLong,
    NothingToRetry,
    NothingToStop,
)
from chat.models import AgentState, Conversation, Message, Role
from chat.selectors import conversation_for_user, conversations_for_user, sidebar_conversations
from core import events
from tests.factories import add_message

# Also run on PostgreSQL (make test): ids and cursors past the column types' range.
pytestmark = pytest.mark.postgres


def texts(conversation):
    return [
        (m.role, "".join(b.text for b in parse_blocks(m.blocks) if isinstance(b, TextBlock)))
        for m in conversation.messages.order_by("order")
    ]


@pytest.mark.django_db
def test_posting_a_message_runs_the_scripted_agent_to_a_full_reply(conversation, user, committed):
    with committed():
        services.post_user_message(
            user=user, conversation_id=conversation.pk, text="  hello there  "
        )

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    [(role_1, said), (role_2, reply)] = texts(conversation)
    assert (role_1, said) == (Role.USER, "hello there")
    assert role_2 == Role.ASSISTANT
    assert reply.startswith("Hello! I'm Parley's **scripted** demo agent.")
    assert not Message.objects.filter(is_draft=True).exists()


@pytest.mark.django_db
def test_first_message_names_an_untitled_conversation(user, dispatched):
    conversation = services.create_conversation(owner=user)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Plan a trip " * 20)
    conversation.refresh_from_db()
    assert conversation.title.startswith("Plan a trip Plan a trip")
    assert len(conversation.title) <= services.AUTO_TITLE_CHARS


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_message_is_refused_and_nothing_is_saved(conversation, user, text):
    with pytest.raises(EmptyMessage):
        services.post_user_message(user=user, conversation_id=conversation.pk, text=text)
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_message_over_the_limit_is_refused(conversation, user, settings):
    settings.PARLEY_MAX_MESSAGE_CHARS = 10
    with pytest.raises(MessageTooLong) as error:
        services.post_user_message(user=user, conversation_id=conversation.pk, text="x" * 11)
    assert "10" in str(error.value)
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_message_at_the_limit_is_accepted(conversation, user, settings):
    settings.PARLEY_MAX_MESSAGE_CHARS = 10
    services.post_user_message(user=user, conversation_id=conversation.pk, text="x" * 10)
    assert Message.objects.filter(role=Role.USER).count() == 1


@pytest.mark.django_db
def test_another_users_conversation_is_not_found_for_every_write(conversation, other_user):
    with pytest.raises(ConversationNotFound):
        services.post_user_message(user=other_user, conversation_id=conversation.pk, text="hi")
    with pytest.raises(ConversationNotFound):
        services.rename_conversation(user=other_user, conversation_id=conversation.pk, title="x")
    with pytest.raises(ConversationNotFound):
        services.delete_conversation(user=other_user, conversation_id=conversation.pk)
    with pytest.raises(ConversationNotFound):
        services.retry_turn(user=other_user, conversation_id=conversation.pk)
    with pytest.raises(ConversationNotFound):
        services.stop_turn(user=other_user, conversation_id=conversation.pk)
    conversation.refresh_from_db()
    assert conversation.title == "First chat"
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_posting_while_the_agent_replies_is_refused(conversation, user):
    Conversation.objects.filter(pk=conversation.pk).update(agent_state=AgentState.LLM_REQUESTING)
    with pytest.raises(AgentBusy):
        services.post_user_message(user=user, conversation_id=conversation.pk, text="again")
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_each_change_advances_the_cursor_and_pushes_after_commit(
    conversation, user, django_capture_on_commit_callbacks, sent, monkeypatch
):
    monkeypatch.setattr(dispatch, "start", lambda conversation_id: sent.append(conversation_id))
    with django_capture_on_commit_callbacks() as callbacks:
        message = services.post_user_message(user=user, conversation_id=conversation.pk, text="hi")
    assert sent == []  # nothing before the commit
    conversation.refresh_from_db()
    # The message and the state change each took one step of the cursor.
    assert (message.created_seq, message.seq, conversation.seq) == (1, 1, 2)
    assert conversation.agent_state == AgentState.LLM_REQUESTING
    for callback in callbacks:
        callback()
    # One event for the transaction (the newest change covers the first), and open pages hear
    # of it before the turn is dispatched.
    group = events.conversation_group(conversation.pk)
    assert sent == [(group, events.conversation_changed(conversation.pk, 2)), conversation.pk]


@pytest.mark.django_db
def test_rename_and_delete(conversation, user):
    services.rename_conversation(
        user=user, conversation_id=conversation.pk, title="  Trip \n plans  "
    )
    conversation.refresh_from_db()
    assert conversation.title == "Trip plans"
    services.delete_conversation(user=user, conversation_id=conversation.pk)
    # Gone for the person at once; still there to undo until the sweep removes it.
    with pytest.raises(ConversationNotFound):
        conversation_for_user(user=user, conversation_id=conversation.pk)
    assert Conversation.objects.filter(pk=conversation.pk).exists()


@pytest.mark.django_db
def test_a_deleted_conversation_is_restored_in_its_place_until_the_sweep_removes_it(user, settings):
    older = services.create_conversation(owner=user, title="Older")
    newer = services.create_conversation(owner=user, title="Newer")
    active = older.updated_at
    services.delete_conversation(user=user, conversation_id=older.pk)
    assert list(conversations_for_user(user=user)) == [newer]
    restored = services.restore_conversation(user=user, conversation_id=older.pk)
    assert restored.updated_at == active  # not moved to the top by the delete and the undo
    assert list(conversations_for_user(user=user)) == [newer, older]

    services.delete_conversation(user=user, conversation_id=older.pk)
    settings.PARLEY_DELETE_UNDO_SECONDS = 60
    services.purge_deleted()  # within the window: kept
    assert Conversation.objects.filter(pk=older.pk).exists()
    settings.PARLEY_DELETE_UNDO_SECONDS = 0
    services.purge_deleted()
    assert not Conversation.objects.filter(pk=older.pk).exists()
    with pytest.raises(ConversationNotFound):
        services.restore_conversation(user=user, conversation_id=older.pk)


@pytest.mark.django_db
def test_only_a_deleted_conversation_of_ones_own_is_restored(user, other_user, conversation):
    with pytest.raises(ConversationNotFound):  # not deleted
        services.restore_conversation(user=user, conversation_id=conversation.pk)
    services.delete_conversation(user=user, conversation_id=conversation.pk)
    with pytest.raises(ConversationNotFound):
        services.restore_conversation(user=other_user, conversation_id=conversation.pk)


@pytest.mark.django_db
def test_pinning_keeps_a_conversation_first_in_the_sidebar_without_moving_it(user):
    older = services.create_conversation(owner=user, title="Older")
    newer = services.create_conversation(owner=user, title="Newer")
    services.pin_conversation(user=user, conversation_id=older.pk, pinned=True)
    assert sidebar_conversations(user=user, limit=10) == [older, newer]
    assert list(conversations_for_user(user=user)) == [newer, older]
    services.pin_conversation(user=user, conversation_id=older.pk, pinned=False)
    assert sidebar_conversations(user=user, limit=10) == [newer, older]


@pytest.mark.django_db
def test_a_conversation_starts_with_its_first_message_and_not_before(user):
    with pytest.raises(EmptyMessage):
        services.start_conversation(owner=user, text="   ")
    assert not Conversation.objects.exists()
    message = services.start_conversation(owner=user, text="Hello  there")
    assert message.conversation.owner == user
    assert message.conversation.title == "Hello there"


@pytest.mark.django_db
def test_retry_and_stop_refuse_when_there_is_nothing_to_do(conversation, user):
    with pytest.raises(NothingToRetry):
        services.retry_turn(user=user, conversation_id=conversation.pk)
    with pytest.raises(NothingToStop):
        services.stop_turn(user=user, conversation_id=conversation.pk)


@pytest.mark.django_db
def test_ids_and_cursors_out_of_any_range_find_nothing(client, user, conversation):
    """As Django's own lookups do, instead of an error from the database."""
    add_message(conversation.pk, "one")
    for bad in (0, -1, 2**63, 10**30, "x", None):
        with pytest.raises(ConversationNotFound):
            selectors.conversation_for_user(user=user, conversation_id=bad)
    assert selectors.messages_changed_since(conversation_id=conversation.pk, after=10**30) == []
    client.force_login(user)
    assert client.get(f"/c/{2**63}/").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("# Plan a **trip** to `Lisbon`\n\n- [flights](https://example.com)\n- _hotels_",
         "Plan a trip to Lisbon flights hotels"),
        ("> Why is\n> the sky ~~green~~ blue?", "Why is the sky green blue?"),
        ("```\nmake run\n```", "make run"),
        ("---", "---"),
    ],
)  # fmt: skip
def test_a_title_made_from_a_first_message_drops_its_markdown(user, dispatched, text, title):
    conversation = services.create_conversation(owner=user)
    services.post_user_message(user=user, conversation_id=conversation.pk, text=text)
    conversation.refresh_from_db()
    assert conversation.title == title
