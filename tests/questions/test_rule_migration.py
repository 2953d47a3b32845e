"""The "Always allow"s kept before approval rules (questions.migrations 0010-0011): each
becomes its user's allow rule for that server's tool; backwards, each such rule is an "Always
allow" again."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from questions.models import ApprovalRule

pytestmark = pytest.mark.postgres

BEFORE = ("questions", "0009_teams_question_assignment")
AFTER = ("questions", "0011_remove_toolpermission")


def migrate(target) -> MigrationExecutor:
    MigrationExecutor(connection).migrate([target])
    return MigrationExecutor(connection)


def latest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


# Migrations change the schema: they cannot run inside a test's transaction.
@pytest.mark.django_db(transaction=True)
def test_always_allows_become_user_allow_rules_and_back(django_user_model):
    ada = django_user_model.objects.create_user(username="ada", password="pw-ada-123")
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-123")
    try:
        old = migrate(BEFORE).loader.project_state([BEFORE]).apps
        ToolPermission = old.get_model("questions", "ToolPermission")
        ToolPermission.objects.create(user_id=ada.pk, tool="mcp__notes__write_note")
        ToolPermission.objects.create(user_id=ada.pk, tool="mcp__my-files__delete__all")
        ToolPermission.objects.create(user_id=bob.pk, tool="mcp__notes__write_note")

        latest()
        kept = sorted(
            ApprovalRule.objects.values_list(
                "user__username", "scope", "agent", "server", "tool", "match", "effect", "shadow"
            )
        )
        assert kept == [
            ("ada", "user", "parley", "my-files", "delete__all", {}, "allow", False),
            ("ada", "user", "parley", "notes", "write_note", {}, "allow", False),
            ("bob", "user", "parley", "notes", "write_note", {}, "allow", False),
        ]
        assert set(ApprovalRule.objects.values_list("created_by__username", flat=True)) == {
            "ada",
            "bob",
        }
        # A rule the old table cannot hold does not come back.
        ApprovalRule.objects.create(
            scope="user",
            user=ada,
            server="notes",
            tool="write_note",
            effect="allow",
            match={"name": "draft-*"},
        )

        old = migrate(BEFORE).loader.project_state([BEFORE]).apps
        back = old.get_model("questions", "ToolPermission").objects.values_list(
            "user__username", "tool"
        )
        assert sorted(back) == [
            ("ada", "mcp__my-files__delete__all"),
            ("ada", "mcp__notes__write_note"),
            ("bob", "mcp__notes__write_note"),
        ]
    finally:
        latest()  # every app at its latest, whatever happened
