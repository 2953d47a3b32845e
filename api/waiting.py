"""Waiting, without holding a thread, until a conversation's turn completes or pauses, or one
of its running tools waits for the person (an elicitation)."""

import time

from channels.db import database_sync_to_async
from django.db.models import Exists, OuterRef

from chat.models import RUNNING_STATES, Conversation
from core.events import conversation_group, subscribe
from questions.models import Question, QuestionKind, QuestionStatus


def _state(conversation_id: int) -> tuple[str, bool] | None:
    """The agent's state, and whether a running tool waits for an answer; None if gone."""
    asking = Question.objects.filter(
        conversation_id=OuterRef("pk"),
        kind=QuestionKind.ELICITATION,
        status=QuestionStatus.PENDING,
    )
    return (
        Conversation.objects.filter(pk=conversation_id)
        .annotate(asking=Exists(asking))
        .values_list("agent_state", "asking")
        .first()
    )


async def wait_until_settled(conversation_id: int, seconds: float) -> None:
    """Return when the turn is no longer running, when a running tool asks the person
    something, after `seconds`, or when this process begins to shut down (the caller then
    answers with the turn still running)."""
    if seconds <= 0:
        return
    deadline = time.monotonic() + seconds
    async with subscribe(conversation_group(conversation_id)) as changes:
        while True:
            found = await database_sync_to_async(_state)(conversation_id)
            remaining = deadline - time.monotonic()
            if (
                found is None
                or found[0] not in RUNNING_STATES
                or found[1]
                or remaining <= 0
                or changes.closed
            ):
                return
            # Any change to the conversation wakes us; re-check at least every second.
            await changes.wait(min(remaining, 1.0))
