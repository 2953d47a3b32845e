"""The reads compiled once (chat.compiled) give what their querysets give."""

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

from chat import selectors, transcript, turns
from chat.compiled import CompiledQuery
from chat.errors import ConversationNotFound
from chat.models import Conversation, Message, Role
from chat.selectors import conversation_for_user, messages_changed_since
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
