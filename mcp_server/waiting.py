"""Waiting, without holding a thread, until an agent's question is resolved: woken by every
change to its conversation (core.events), with the Question row read again at least every
MCP_PROGRESS_SECONDS, when a progress notification also goes out."""

import time
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async
from django.conf import settings

from core.events import conversation_group, subscribe, user_group
from questions.models import Question

# Why a wait ended without an outcome (StoppedWaiting.reason).
SHUTTING_DOWN = "shutting down"
CREDENTIAL_ENDED = "credential ended"


class StoppedWaiting(Exception):
    """The wait ended without an outcome: the process is shutting down, or the credential
    that made the call has ended. The question stays open."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _resolved(question_id: int) -> tuple[bool, Question | None]:
    """(resolved, the row): (True, None) once the question is gone with its conversation."""
    question = Question.objects.select_related("answered_by").filter(pk=question_id).first()
    return (question is None or not question.is_pending), question


async def wait_for_outcome(
    *,
    question_id: int,
    conversation_id: int,
    user_id: int,
    still_valid: Callable[[], bool],
    progress: Callable[[float], Awaitable[None]],
    interval: float | None = None,
) -> Question | None:
    """The question once it is resolved (None: deleted with its conversation). `progress` is
    called with the seconds waited so far, now and at least every `interval` seconds; a change
    to the conversation, or to the user's sessions and tokens (core.events.user_group: a
    revoked token), wakes the wait at once. `interval`: MCP_PROGRESS_SECONDS unless given.
    Raises StoppedWaiting."""
    interval = settings.MCP_PROGRESS_SECONDS if interval is None else interval
    started = time.monotonic()
    async with subscribe(conversation_group(conversation_id), user_group(user_id)) as changes:
        last_progress: float | None = None
        while True:
            resolved, question = await database_sync_to_async(_resolved)(question_id)
            if resolved:
                return question
            if changes.closed:
                raise StoppedWaiting(SHUTTING_DOWN)
            if not await database_sync_to_async(still_valid)():
                raise StoppedWaiting(CREDENTIAL_ENDED)
            now = time.monotonic()
            if last_progress is None or now - last_progress >= interval:
                await progress(now - started)
                last_progress = now
            await changes.wait(max(0.0, interval - (time.monotonic() - last_progress)))
