from django.db import migrations, models


def fill_search_text(apps, schema_editor):
    """Existing messages get the text that search finds (chat.blocks.searchable_text: the text
    blocks, one per line), read from their stored blocks as they are."""
    Message = apps.get_model("chat", "Message")
    changed = []
    for message in Message.objects.only("pk", "blocks").iterator(chunk_size=500):
        blocks = message.blocks if isinstance(message.blocks, list) else []
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text"
            and isinstance(block.get("text"), str) and block["text"]
        ]
        if texts:
            message.search_text = "\n".join(texts)
            changed.append(message)
        if len(changed) >= 500:
            Message.objects.bulk_update(changed, ["search_text"])
            changed = []
    Message.objects.bulk_update(changed, ["search_text"])


class Migration(migrations.Migration):
    dependencies = [("chat", "0006_message_superseded")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_text",
            field=models.TextField(
                blank=True, default="", editable=False, verbose_name="searchable text"
            ),
        ),
        migrations.RunPython(fill_search_text, migrations.RunPython.noop, elidable=True),
    ]
