"""Conversations stored before they recorded having sub-agents (chat.migrations 0009): the
parents among them are flagged, so their open pages keep showing their sub-agents' changes."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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
