"""The background side of deadlines: every server and worker process runs `sweep` on each of
its sweeps (chat.engine.runner), which expires the questions whose deadline passed, sends the
reminders that are due and escalates the assigned questions left unanswered too long. Each is
found by indexed columns of questions.Question, and resolved by a service that makes it happen
exactly once however many processes sweep."""

from django.utils import timezone

from questions import resolving
from questions.models import Question, QuestionStatus

# At most this many of each per sweep; the next sweep takes the rest.
BATCH = 100


def sweep() -> None:
    now = timezone.now()
    # A deleted conversation's questions wait with it: expired, they would resume its agent
    # while nobody can see it; restored (Undo), the next sweep finds them.
    pending = Question.objects.filter(
        status=QuestionStatus.PENDING, conversation__deleted_at__isnull=True
    )
    due = pending.filter(expires_at__lte=now).order_by("expires_at")
    for question_id in list(due.values_list("pk", flat=True)[:BATCH]):
        resolving.expire_question(question_id=question_id)
    reminders = pending.filter(reminded_at__isnull=True, remind_at__lte=now).order_by("remind_at")
    for question_id in list(reminders.values_list("pk", flat=True)[:BATCH]):
        resolving.send_reminder(question_id=question_id)
    # Assigned questions still waiting past QUESTION_ESCALATE_AFTER go back to the owner.
    escalations = pending.filter(escalate_at__lte=now).order_by("escalate_at")
    for question_id in list(escalations.values_list("pk", flat=True)[:BATCH]):
        resolving.escalate_question(question_id=question_id)
