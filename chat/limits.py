"""Limits per user (and login attempts per account and address), counted in Django's cache:
Redis when REDIS_URL is set, so every process counts together; else this process's memory.

Fixed one-minute windows for rates; open event streams are a counter taken and given back.
Every limit is a setting (README, Configuration); 0 turns it off.
"""

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache

from chat.errors import (
    SearchRunning,
    TooManyConversations,
    TooManyMessages,
    TooManyRunningTurns,
    TooManySearches,
    TooManyStreams,
    TooManySubagents,
    TooManyToolCalls,
)
from chat.models import RUNNING_STATES, Conversation

MINUTE = 60
# What a refusal of a new turn suggests waiting: about one short turn.
RUNNING_TURN_RETRY_SECONDS = 5
# An open-stream count no stream has touched for this long is dropped (a crashed process
# cannot give its streams back); open streams touch it at least every STREAM_TOUCH_SECONDS.
STREAM_COUNT_TTL = 600
STREAM_TOUCH_SECONDS = 60


def _key(*parts) -> str:
    return "parley:limit:" + ":".join(str(part) for part in parts)


def _count(name: str, subject, window: int) -> int:
    """Count one event for `subject` in the current window; the count so far."""
    start = int(time.time() // window) * window
    key = _key(name, subject, start)
    cache.add(key, 0, timeout=window + 5)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=window + 5)
        return 1


def _window_left(window: int) -> int:
    now = time.time()
    return int(int(now // window) * window + window - now) + 1


def count_in_window(name: str, subject, limit: int, window: int = MINUTE) -> int | None:
    """Count one event for `subject`; the seconds until its window ends when this event is
    over `limit`, else None."""
    if limit <= 0:
        return None
    if _count(name, subject, window) > limit:
        return _window_left(window)
    return None


def check_message_rate(*, user) -> None:
    """Raise TooManyMessages past PARLEY_MESSAGES_PER_MINUTE."""
    wait = count_in_window("messages", user.pk, settings.PARLEY_MESSAGES_PER_MINUTE)
    if wait is not None:
        raise TooManyMessages(wait)


def check_tool_call_rate(*, user_id: int) -> None:
    """Raise TooManyToolCalls past PARLEY_MCP_CALLS_PER_MINUTE: every call to Parley's MCP
    server counts, whatever it asks (an unknown tool, a bad call, a call made again)."""
    wait = count_in_window("mcp-calls", user_id, settings.PARLEY_MCP_CALLS_PER_MINUTE)
    if wait is not None:
        raise TooManyToolCalls(wait)


def check_conversation_rate(*, user) -> None:
    """Raise TooManyConversations past PARLEY_CONVERSATIONS_PER_MINUTE."""
    wait = count_in_window("conversations", user.pk, settings.PARLEY_CONVERSATIONS_PER_MINUTE)
    if wait is not None:
        raise TooManyConversations(wait)


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
    key = _key("searching", user.pk)
    # Expires on its own if the process dies mid-search: after the longest a search may run.
    if not cache.add(key, 1, timeout=int(settings.PARLEY_SEARCH_TIMEOUT) + 5):
        raise SearchRunning(1)
    try:
        yield
    finally:
        cache.delete(key)


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


class StreamSlot:
    """One of the user's PARLEY_MAX_STREAMS open event streams; give it back with release()."""

    def __init__(self, user_id: int) -> None:
        self.key = _key("streams", user_id)
        self.held = False
        self.touched = 0.0
        limit = settings.PARLEY_MAX_STREAMS
        if limit <= 0:
            return
        cache.add(self.key, 0, timeout=STREAM_COUNT_TTL)
        try:
            count = cache.incr(self.key)
        except ValueError:
            cache.add(self.key, 1, timeout=STREAM_COUNT_TTL)
            count = 1
        self.held = True
        self.touched = time.monotonic()
        if count > limit:
            self.release()
            raise TooManyStreams(RUNNING_TURN_RETRY_SECONDS)

    def touch(self) -> None:
        """Keep the count alive while the stream is open."""
        if self.held and time.monotonic() - self.touched > STREAM_TOUCH_SECONDS:
            self.touched = time.monotonic()
            cache.touch(self.key, STREAM_COUNT_TTL)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        try:
            if cache.decr(self.key) < 0:
                cache.set(self.key, 0, timeout=STREAM_COUNT_TTL)
        except ValueError:
            pass  # the count expired meanwhile


# --- Login ---------------------------------------------------------------------------------
#
# Failures are counted per account and per client address. Once either passes its limit
# within PARLEY_LOGIN_LOCKOUT_SECONDS, logins for it are refused — before the password is
# hashed, so refused guesses cost nothing — until that time has passed; attempts while locked
# do not extend it. So that an attacker cannot keep a victim out by failing on purpose, a
# browser that signed in to the account before carries a signed "known device" cookie: the
# account's lock does not apply to it (its own failures are counted, per device, instead).


def account_key(username: str) -> str:
    """The account as counters and device cookies name it (usernames may hold anything)."""
    return hashlib.sha256(username.strip().casefold().encode("utf-8", "replace")).hexdigest()


def _subjects(username: str, address: str, device: str | None) -> list[tuple[str, str, int]]:
    account = account_key(username)
    per_account = settings.PARLEY_LOGIN_FAILURES_PER_ACCOUNT
    subjects = [("address", address, settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS)]
    if device == account:
        # A known device: counted on its own, not locked by others' failures on the account.
        subjects.append(("device", f"{account}:{address}", per_account))
    else:
        subjects.append(("account", account, per_account))
    return subjects


def login_locked_for(*, username: str, address: str, device: str | None = None) -> int | None:
    """Seconds until a login may be tried again for this account from here, or None."""
    waits = []
    for kind, subject, _limit in _subjects(username, address, device):
        until = cache.get(_key("login-locked", kind, subject))
        if until is not None and until > time.time():
            waits.append(int(until - time.time()) + 1)
    return max(waits) if waits else None


def login_failed(*, username: str, address: str, device: str | None = None) -> None:
    """Count a failed login; lock what passed its limit for PARLEY_LOGIN_LOCKOUT_SECONDS."""
    lockout = settings.PARLEY_LOGIN_LOCKOUT_SECONDS
    for kind, subject, limit in _subjects(username, address, device):
        if limit <= 0:
            continue
        if _count(f"login-{kind}", subject, lockout) >= limit:
            cache.add(_key("login-locked", kind, subject), time.time() + lockout, timeout=lockout)
