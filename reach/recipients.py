"""Who a question reaches away from Parley's pages."""

from questions.notifications import QuestionEvent


def recipient_ids(event: QuestionEvent) -> list[int]:
    """The users the question of `event` waits for: its conversation's owner. The one place
    this is decided, for e-mail and Web Push alike."""
    return [event.owner_id]
