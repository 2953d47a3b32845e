"""Tool results of answered questions name the user message that replied (chat's
`reply_message_id`), which earlier versions kept only in the question block's
`answerMessageId`. Fills it in for transcripts written before."""

from django.db import migrations


def name_replies(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    replies: dict[tuple[int, str], int] = {}
    for message in Message.objects.filter(role="assistant").iterator():
        for block in message.blocks if isinstance(message.blocks, list) else []:
            extra = block.get("extra") if isinstance(block, dict) else None
            if (
                block.get("action_type") == "question_request"
                and isinstance(extra, dict)
                and str(extra.get("answerMessageId", "")).isdigit()
            ):
                key = (message.conversation_id, str(extra.get("toolCallId")))
                replies[key] = int(extra["answerMessageId"])
    if not replies:
        return
    conversations = {conversation_id for conversation_id, _ in replies}
    for message in Message.objects.filter(role="tool", conversation_id__in=conversations):
        changed = False
        for block in message.blocks if isinstance(message.blocks, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            reply = replies.get((message.conversation_id, str(block.get("tool_call_id"))))
            if reply is not None and block.get("reply_message_id") is None:
                block["reply_message_id"] = reply
                changed = True
        if changed:
            message.save(update_fields=["blocks"])


class Migration(migrations.Migration):
    dependencies = [("chat", "0004_turn_pauses")]

    operations = [migrations.RunPython(name_replies, migrations.RunPython.noop)]
