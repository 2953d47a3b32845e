import django.contrib.postgres.search
from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models

import chat.models

# Only PostgreSQL has GIN indexes (and text search): on SQLite the column is empty and search
# matches parts of search_text instead, so the index is made here, for PostgreSQL alone, rather
# than declared in the model's Meta, which every backend would be asked to create.
SEARCH_INDEX = GinIndex(fields=["search_vector"], name="message_search_vector")


def add_search_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("chat", "Message"), SEARCH_INDEX)


def remove_search_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("chat", "Message"), SEARCH_INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0009_conversation_has_subagents"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=chat.models.SearchDocument("search_text", config="simple"),
                output_field=django.contrib.postgres.search.SearchVectorField(),
                verbose_name="search vector",
            ),
        ),
        migrations.RunPython(add_search_index, remove_search_index),
    ]
