"""What happens to questions, told to the apps that listen (webhooks, mail and push): asked,
answered, rejected, expired, assigned, and the reminder before a deadline.

Apps connect receivers to the `question_changed` signal from their AppConfig.ready(); each is
called as `receiver(sender=QuestionEvent, event=...)` inside the transaction that made the
change, so what it writes (an outbox row) commits or rolls back with it; anything that leaves
the process must wait for the commit. A receiver that raises rolls the change back.
"""

from dataclasses import dataclass
from datetime import datetime

from django.dispatch import Signal

from questions.models import Question, QuestionKind, QuestionStatus
from questions.selectors import recipient_ids

ASKED = "question.asked"
ANSWERED = "question.answered"
REJECTED = "question.rejected"
EXPIRED = "question.expired"
REMINDER = "question.reminder"
# Someone assigned the question to a person (or back to everyone), or it was escalated to
# the conversation's owner: told to those it now waits for.
ASSIGNED = "question.assigned"
# An approval before a tool runs (questions.approvals): asked, and decided or expired.
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_RESOLVED = "approval.resolved"
EVENT_TYPES = (
    ASKED,
    ANSWERED,
    REJECTED,
    EXPIRED,
    REMINDER,
    ASSIGNED,
    APPROVAL_REQUESTED,
    APPROVAL_RESOLVED,
)

# The event each resolution makes (a cancelled question tells nobody: nobody answered it,
# and its conversation had moved on).
RESOLVED = {
    QuestionStatus.ANSWERED: ANSWERED,
    QuestionStatus.AUTO_RESOLVED: ANSWERED,
    QuestionStatus.REJECTED: REJECTED,
    QuestionStatus.EXPIRED: EXPIRED,
}


def asked_event(question: Question) -> str:
    return APPROVAL_REQUESTED if question.kind == QuestionKind.TOOL_APPROVAL else ASKED


def resolved_event(question: Question) -> str | None:
    """The event a resolution makes, or None. An elicitation tells nobody: the tool that asked
    waits for it itself, and its call's outcome is what matters."""
    if question.kind == QuestionKind.ELICITATION:
        return None
    if question.kind == QuestionKind.TOOL_APPROVAL:
        return APPROVAL_RESOLVED if question.status in RESOLVED else None
    return RESOLVED.get(question.status)


@dataclass(frozen=True)
class QuestionEvent:
    type: str
    question: Question
    # The conversation's owner.
    owner_id: int
    at: datetime
    # The users the question waits for: its assignee if it has one, else the conversation's
    # owner and participants (questions.selectors.recipient_ids). Listeners that reach
    # people (webhooks, mail, push) reach these.
    recipient_ids: tuple[int, ...]


question_changed = Signal()

# Sent for every resolution of a question, whatever it became (cancelled too, which
# `question_changed` tells nobody): for the apps that show a question elsewhere and must show
# it closed there (the Slack app's messages). Called as `receiver(sender=Question,
# question=..., at=...)` inside the transaction that resolved it, as `question_changed` is.
question_closed = Signal()


def publish(event: QuestionEvent) -> None:
    """Call every receiver of `question_changed`, inside the caller's transaction."""
    question_changed.send(sender=QuestionEvent, event=event)


def tell(event: str, question: Question, *, at: datetime) -> None:
    """Publish that `event` (one of EVENT_TYPES) happened to `question` at `at`, for those it
    waits for now (read here: `recipient_ids`), inside the caller's transaction."""
    publish(
        QuestionEvent(
            type=event,
            question=question,
            owner_id=question.conversation.owner_id,
            at=at,
            recipient_ids=recipient_ids(question),
        )
    )
