"""Conversations stored before a column of theirs existed: the parents among them are flagged
as having sub-agents (chat.migrations 0009), so their open pages keep showing their sub-agents'
changes; each counts its messages (0016), so the next message goes after its newest."""

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from chat.blocks import TextBlock
from chat.models import Conversation, Role
from chat.transcript import Transcript, lock

pytestmark = pytest.mark.postgres

BEFORE = ("chat", "0008_message_ordering_by_column")
AFTER = ("chat", "0009_conversation_has_subagents")


def migrate(target) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return MigrationExecutor(connection)


# Migrations change the schema: they cannot run inside a test's transaction.
@pytest.mark.django_db(transaction=True)
def test_conversations_with_sub_agents_stored_before_the_flag_get_it(django_user_model):
    ada = django_user_model.objects.create_user(username="ada", password="pw-ada-123")
    old = migrate(BEFORE).loader.project_state([BEFORE]).apps
    Conversation = old.get_model("chat", "Conversation")
    parent = Conversation.objects.create(owner_id=ada.pk, title="Research")
    Conversation.objects.create(owner_id=ada.pk, parent=parent, title="Part 1")
    Conversation.objects.create(owner_id=ada.pk, title="Chat")

    new = migrate(AFTER).loader.project_state([AFTER]).apps
    flagged = dict(
        new.get_model("chat", "Conversation").objects.values_list("title", "has_subagents")
    )
    assert flagged == {"Research": True, "Part 1": False, "Chat": False}
    # Every app back to its latest: going back undid the other apps' migrations on top of chat's.
    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_conversations_stored_before_the_count_append_after_their_newest_message(
    django_user_model,
):
    ada = django_user_model.objects.create_user(username="ada", password="pw-ada-123")
    before = ("chat", "0015_conversation_turn_started_by")
    old = migrate(before).loader.project_state([before]).apps
    OldConversation = old.get_model("chat", "Conversation")
    OldMessage = old.get_model("chat", "Message")
    talk = OldConversation.objects.create(owner_id=ada.pk, title="Talk", seq=3)
    for order in range(3):
        OldMessage.objects.create(
            conversation=talk, role="user", order=order, blocks=[], created_seq=1, seq=1
        )
    OldConversation.objects.create(owner_id=ada.pk, title="Empty")

    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    counts = dict(Conversation.objects.values_list("title", "message_count"))
    assert counts == {"Talk": 3, "Empty": 0}
    with transaction.atomic(), Transcript(lock(talk.pk)) as transcript:
        appended = transcript.append(role=Role.USER, blocks=[TextBlock(text="And then?")])
    assert appended.order == 3
    assert Conversation.objects.get(pk=talk.pk).message_count == 4
