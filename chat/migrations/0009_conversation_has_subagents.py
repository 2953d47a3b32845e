from django.db import migrations, models


def flag_parents(apps, schema_editor):
    Conversation = apps.get_model("chat", "Conversation")
    parents = Conversation.objects.filter(parent__isnull=True, children__isnull=False)
    Conversation.objects.filter(pk__in=parents.values("pk")).update(has_subagents=True)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0008_message_ordering_by_column"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="has_subagents",
            field=models.BooleanField(default=False, editable=False, verbose_name="has sub-agents"),
        ),
        migrations.RunPython(flag_parents, migrations.RunPython.noop, elidable=True),
    ]
