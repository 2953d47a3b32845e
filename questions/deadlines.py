"""The background side of deadlines: every server and worker process runs `sweep` on each of
its sweeps (chat.runner), which expires the questions whose deadline passed and sends the
reminders that are due. Both are found by indexed columns of questions.Deadline, and each is
resolved by a service that makes it happen exactly once however many processes sweep."""

from django.utils import timezone

from questions import services
from questions.models import Deadline

# At most this many of each per sweep; the next sweep takes the rest.
BATCH = 100


def sweep() -> None:
    now = timezone.now()
    due = (
        Deadline.objects.filter(resolved_at__isnull=True, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("conversation_id", "tool_call_id")[:BATCH]
    )
    for conversation_id, tool_call_id in list(due):
        if not services.expire_question(conversation_id=conversation_id, tool_call_id=tool_call_id):
            # Resolved in a way that closed no deadline (a block written before deadlines):
            # close it, so the sweep stops finding it.
            Deadline.objects.filter(
                conversation_id=conversation_id,
                tool_call_id=tool_call_id,
                resolved_at__isnull=True,
                expires_at__lte=now,
            ).update(resolved_at=now)
    reminders = (
        Deadline.objects.filter(
            resolved_at__isnull=True, reminded_at__isnull=True, remind_at__lte=now
        )
        .order_by("remind_at")
        .values_list("pk", flat=True)[:BATCH]
    )
    for deadline_id in list(reminders):
        services.send_reminder(deadline_id=deadline_id)
