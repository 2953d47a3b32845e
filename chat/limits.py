"""The chat's own limits per user: searches (a rate and one at a time, in Django's cache, with
core.limits), and the turns and sub-agents running at once (counted in the database). The
limits every app shares are core.limits."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache

from chat.errors import SearchRunning, TooManyRunningTurns, TooManySearches, TooManySubagents
from chat.models import RUNNING_STATES, Conversation
from core.limits import count_in_window, key

# What a refusal of a new turn suggests waiting: about one short turn.
RUNNING_TURN_RETRY_SECONDS = 5


def check_search_rate(*, user) -> None:
    """Raise TooManySearches past PARLEY_SEARCHES_PER_MINUTE."""
    wait = count_in_window("searches", user.pk, settings.PARLEY_SEARCHES_PER_MINUTE)
    if wait is not None:
        raise TooManySearches(wait)


@contextmanager
def search_slot(*, user) -> Iterator[None]:
    """The user's one search at a time: raises SearchRunning while another of theirs runs.
    A burst of searches at once loads the database for everyone, however few a minute the
    rate allows; one at a time, a user's searches cost others little (bench/isolation.py)."""
    searching = key("searching", user.pk)
    # Expires on its own if the process dies mid-search: after the longest a search may run.
    if not cache.add(searching, 1, timeout=int(settings.PARLEY_SEARCH_TIMEOUT) + 5):
        raise SearchRunning(1)
    try:
        yield
    finally:
        cache.delete(searching)


def check_turn_slot(*, user, conversation: Conversation) -> None:
    """Raise TooManyRunningTurns when `user` already has PARLEY_MAX_RUNNING_TURNS turns
    running elsewhere. Caller is in a transaction: the user's row is locked, so two
    conversations cannot both take the last slot."""
    limit = settings.PARLEY_MAX_RUNNING_TURNS
    if limit <= 0:
        return
    _lock_user(user.pk)
    running = (
        Conversation.objects.filter(owner=user, parent__isnull=True, agent_state__in=RUNNING_STATES)
        .exclude(pk=conversation.pk)
        .count()
    )
    if running >= limit:
        raise TooManyRunningTurns(RUNNING_TURN_RETRY_SECONDS)


def check_subagent_slots(*, owner_id: int, wanted: int) -> None:
    """Raise TooManySubagents when `wanted` more sub-agents would pass the owner's
    PARLEY_MAX_RUNNING_SUBAGENTS: sub-agents have a cap of their own, beside the turns the
    person started (check_turn_slot). Caller is in a transaction: the owner's row is locked,
    so two spawns cannot both take the last slots."""
    limit = settings.PARLEY_MAX_RUNNING_SUBAGENTS
    if limit <= 0:
        return
    _lock_user(owner_id)
    running = Conversation.objects.filter(
        owner_id=owner_id, parent__isnull=False, agent_state__in=RUNNING_STATES
    ).count()
    if running + wanted > limit:
        raise TooManySubagents(running=running, limit=limit)


def _lock_user(user_id: int) -> None:
    list(get_user_model().objects.select_for_update().filter(pk=user_id).values_list("pk"))
