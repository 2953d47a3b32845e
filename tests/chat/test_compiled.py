"""The reads and writes compiled once (chat.compiled) do what the ORM does."""

from datetime import UTC, datetime

import pytest
from django.db import DatabaseError, transaction
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.db.transaction import TransactionManagementError

from chat import runtime, selectors, transcript, turns
from chat.compiled import CompiledDelete, CompiledQuery, insert, save_fields
from chat.errors import ConversationNotFound
from chat.models import Conversation, Message, Role
from chat.selectors import (
    NEWEST_FIRST_BATCH,
    conversation_for_user,
    messages_changed_since,
)
from questions.models import QuestionDraft
from tests.factories import add_message

pytestmark = pytest.mark.django_db


def fields(obj) -> dict:
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def test_each_compiled_read_gives_what_its_queryset_gives(user, other_user, conversation):
    """Field for field (datetimes aware, JSON parsed, booleans as booleans), annotations
    included, for every shape in use; and nothing of another user's."""
    child = Conversation.objects.create(owner=user, parent=conversation, title="child")
    lonely = Conversation.objects.create(owner=user, title="no children")
    theirs = Conversation.objects.create(owner=other_user, title="theirs")
    for text in ("one", "two", "three"):
        add_message(conversation.pk, text)
    Message.objects.filter(conversation=conversation, order=2).update(is_draft=True)

    with transaction.atomic():
        for (_, flag), query in selectors._CONVERSATION_QUERIES.items():
            for target in (conversation, lonely):
                compiled = query.first(owner_id=user.pk, pk=target.pk)
                expected = query.build(owner_id=user.pk, pk=target.pk).get()
                assert fields(compiled) == fields(expected)
                assert compiled.created_at.tzinfo is not None
                if flag:
                    assert compiled.has_children is (target == conversation)
            assert query.first(owner_id=user.pk, pk=theirs.pk) is None
            assert query.first(owner_id=user.pk, pk=child.pk) is None  # only through its parent
        assert fields(transcript.lock(conversation.pk)) == fields(
            Conversation.objects.get(pk=conversation.pk)
        )

    for after in (-1, 0, conversation.seq + 1):
        compiled = messages_changed_since(conversation_id=conversation.pk, after=after)
        expected = list(
            Message.objects.filter(conversation=conversation, seq__gt=after).order_by("order")
        )
        assert [fields(m) for m in compiled] == [fields(m) for m in expected]
    every = messages_changed_since(conversation_id=conversation.pk, after=-1)
    assert [m.blocks for m in every] == [
        [{"type": "text", "text": text}] for text in ("one", "two", "three")
    ]
    draft = turns._draft(conversation)
    assert (draft.order, draft.is_draft, draft.role) == (2, True, Role.ASSISTANT)
    assert turns._draft(lonely) is None


def test_ids_and_cursors_out_of_any_range_find_nothing(user, conversation):
    """As Django's own lookups do, instead of an error from the database."""
    add_message(conversation.pk, "one")
    for bad in (0, -1, 2**63, 10**30, "x", None):
        with pytest.raises(ConversationNotFound):
            conversation_for_user(user=user, conversation_id=bad)
    assert messages_changed_since(conversation_id=conversation.pk, after=10**30) == []


@pytest.mark.django_db(transaction=True)
def test_a_locking_read_needs_a_transaction(conversation):
    """On every database (Django itself lets it pass on SQLite)."""
    with transaction.atomic():
        transcript.lock(conversation.pk)
    with pytest.raises(TransactionManagementError):
        transcript.lock(conversation.pk)


def test_a_value_that_is_not_a_parameter_of_the_sql_is_refused():
    """A value that shapes the SQL (here a LIMIT, which Django writes into it) would be
    frozen at the first one: refused when compiled."""
    with pytest.raises(ValueError, match="size"):
        CompiledQuery(lambda size: Message.objects.all()[:size]).all(size=3)


def test_the_compiled_transcript_reads_give_what_their_querysets_give(user, conversation):
    """Drafts, superseded messages and other roles mixed in; pages of the agent's messages
    newest first, across more than one page."""
    for i in range(NEWEST_FIRST_BATCH + 5):
        add_message(conversation.pk, f"agent {i}")
        add_message(conversation.pk, f"user {i}", role=Role.USER)
    Message.objects.filter(conversation=conversation, order=3).update(superseded=True)
    Message.objects.filter(conversation=conversation, order=7).update(is_draft=True)
    other = Conversation.objects.create(owner=user, title="other")
    add_message(other.pk, "elsewhere")
    reads = [
        (runtime._HISTORY, {"conversation_id": conversation.pk}),
        (selectors._SHOWN_BELOW, {"conversation_id": conversation.pk, "below": 9}),
        (transcript._NEWEST, {"conversation_id": conversation.pk}),
        (transcript._NEWEST, {"conversation_id": other.pk}),
        (selectors._ASSISTANT_BELOW, {"conversation_id": conversation.pk, "below": 9}),
    ]
    for query, values in reads:
        compiled = query.all(**values)
        assert compiled
        assert [fields(m) for m in compiled] == [fields(m) for m in query.build(**values)]
    newest = selectors.assistant_newest_first(conversation.pk)
    agent = conversation.messages.filter(role=Role.ASSISTANT).order_by("-order")
    assert [m.pk for m in newest] == [m.pk for m in agent]


def values(obj) -> dict:
    """What the database holds for `obj`'s row, read again (its id aside)."""
    row = fields(type(obj).objects.get(pk=obj.pk))
    del row["id"]
    return row


def test_compiled_writes_store_what_model_save_stores(user, conversation):
    """Every kind of field (aware datetimes, JSON with non-ASCII text, booleans, big
    integers, NULL), on the database the suite runs on; an update writes only its fields."""
    twin = Conversation.objects.create(owner=user, title=conversation.title)
    when = datetime(2026, 11, 27, 6, 30, 15, 123456, tzinfo=UTC)
    for row in (conversation, twin):
        row.created_at = twin.created_at
        row.title = "Ação 对话 ✓"
        row.lease_token = 2**62
        row.lease_expires_at = when
        row.updated_at = when
    save_fields(conversation)
    twin.save()
    assert values(conversation) == values(twin)
    conversation.lease_expires_at = None
    conversation.title = "not written"
    save_fields(conversation, ["lease_expires_at"])
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.lease_expires_at, stored.title) == (None, "Ação 对话 ✓")

    made = [
        Message(
            conversation=conversation,
            role=Role.TOOL,
            order=order,
            blocks=[{"type": "text", "text": 'olá 你好 "quoted"', "n": 2**40, "ok": True}],
            search_text="olá",
            is_draft=True,
            created_seq=7,
            seq=8,
            created_at=when,
            updated_at=when,
        )
        for order in (0, 1)
    ]
    insert(made[0])
    made[1].save(force_insert=True)
    assert made[0].pk is not None and not made[0]._state.adding
    assert values(made[0]) == {**values(made[1]), "order": 0}
    made[0].version, made[0].is_draft, made[0].search_text = 5, False, "not written"
    save_fields(made[0], ["version", "is_draft"])
    stored = Message.objects.get(pk=made[0].pk)
    assert (stored.version, stored.is_draft, stored.search_text) == (5, False, "olá")


def test_a_compiled_update_of_a_row_that_is_gone_fails_as_save_does(conversation):
    gone = Conversation.objects.get(pk=conversation.pk)
    Conversation.objects.filter(pk=conversation.pk).delete()
    with pytest.raises(DatabaseError):
        save_fields(gone, ["title"])


def test_a_compiled_update_of_a_deferred_instance_writes_only_what_was_loaded(conversation):
    partial = Conversation.objects.only("pk", "title").get(pk=conversation.pk)
    partial.title = "renamed"
    save_fields(partial)
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.title, stored.seq, stored.agent_state) == (
        "renamed",
        conversation.seq,
        conversation.agent_state,
    )


def test_no_signal_receiver_is_connected_to_the_models_written_without_save():
    """chat.compiled's writes send no signals: a receiver would silently miss them."""
    for signal in (pre_save, post_save):
        for model in (Conversation, Message):
            assert not signal.has_listeners(model), (signal, model)
    for signal in (pre_delete, post_delete):
        assert not signal.has_listeners(QuestionDraft), signal


def test_a_compiled_delete_deletes_what_its_queryset_would(user, other_user, conversation):
    """Only the rows matching the values of this call (a text value included), however many
    calls came before with others."""
    theirs = Conversation.objects.create(owner=other_user, title="theirs")
    for owner, target in ((user, conversation), (other_user, theirs)):
        for call in ("q1", "q2", "12"):
            QuestionDraft.objects.create(
                conversation=target, user=owner, tool_call_id=call, data=[]
            )
    delete = CompiledDelete(
        lambda conversation_id, tool_call_id: QuestionDraft.objects.filter(
            conversation_id=conversation_id, tool_call_id=tool_call_id
        )
    )
    assert delete(conversation_id=conversation.pk, tool_call_id="q1") == 1
    assert delete(conversation_id=conversation.pk, tool_call_id="12") == 1
    assert delete(conversation_id=conversation.pk, tool_call_id="q1") == 0
    left = QuestionDraft.objects.values_list("conversation_id", "tool_call_id")
    assert sorted(left) == sorted(
        [(conversation.pk, "q2"), (theirs.pk, "q1"), (theirs.pk, "q2"), (theirs.pk, "12")]
    )
