from django.db import migrations, models
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce


def count_messages(apps, schema_editor):
    """Each conversation's next order: one past its newest message's (orders start at 0)."""
    Conversation = apps.get_model("chat", "Conversation")
    Message = apps.get_model("chat", "Message")
    newest = Message.objects.filter(conversation=OuterRef("pk")).order_by("-order")
    Conversation.objects.update(
        message_count=Coalesce(Subquery(newest.values("order")[:1]) + 1, Value(0))
    )


class Migration(migrations.Migration):
    dependencies = [("chat", "0015_conversation_turn_started_by")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="message_count",
            field=models.PositiveIntegerField(default=0, editable=False, verbose_name="messages"),
        ),
        migrations.RunPython(count_messages, migrations.RunPython.noop),
    ]
