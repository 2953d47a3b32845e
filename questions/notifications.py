"""What happens to questions, told to the apps that listen (webhooks): asked, answered,
rejected, expired, and the reminder before a deadline.

Listeners register from their AppConfig.ready() and are called inside the transaction that
made the change, so what they write (an outbox row) commits or rolls back with it; anything
that leaves the process must wait for the commit.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from questions.models import Question, QuestionStatus

ASKED = "question.asked"
ANSWERED = "question.answered"
REJECTED = "question.rejected"
EXPIRED = "question.expired"
REMINDER = "question.reminder"
EVENT_TYPES = (ASKED, ANSWERED, REJECTED, EXPIRED, REMINDER)

# The event each resolution makes (a cancelled question tells nobody: nobody answered it,
# and its conversation had moved on).
RESOLVED = {
    QuestionStatus.ANSWERED: ANSWERED,
    QuestionStatus.AUTO_RESOLVED: ANSWERED,
    QuestionStatus.REJECTED: REJECTED,
    QuestionStatus.EXPIRED: EXPIRED,
}


@dataclass(frozen=True)
class QuestionEvent:
    type: str
    question: Question
    owner_id: int
    at: datetime


Listener = Callable[[QuestionEvent], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def publish(event: QuestionEvent) -> None:
    """Call every listener, inside the caller's transaction."""
    for listener in _listeners:
        listener(event)
