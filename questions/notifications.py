"""What happens to questions, told to the apps that listen (webhooks): asked, answered,
rejected, expired, and the reminder before a deadline.

Listeners register from their AppConfig.ready() and are called inside the transaction that
made the change, so what they write (an outbox row) commits or rolls back with it; anything
that leaves the process must wait for the commit.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from questions.blocks import EXPIRED, REJECTED, REPLIED, QuestionPayload

ASKED = "question.asked"
ANSWERED = "question.answered"
REJECTED_EVENT = "question.rejected"
EXPIRED_EVENT = "question.expired"
REMINDER = "question.reminder"
EVENT_TYPES = (ASKED, ANSWERED, REJECTED_EVENT, EXPIRED_EVENT, REMINDER)

# The event a resolution makes.
RESOLVED = {REPLIED: ANSWERED, REJECTED: REJECTED_EVENT, EXPIRED: EXPIRED_EVENT}


@dataclass(frozen=True)
class QuestionEvent:
    type: str
    conversation_id: int
    owner_id: int
    payload: QuestionPayload
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
