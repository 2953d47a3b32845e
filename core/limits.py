"""Limits per user (and login attempts per account and address), counted in Django's cache:
Redis when REDIS_URL is set, so every process counts together; else this process's memory.

Fixed one-minute windows for rates; open event streams are a counter taken and given back.
Every limit is a setting (README, Configuration); 0 turns it off. An app's own limits count
with `count_in_window` under names of their own.
"""

import hashlib
import time

from django.conf import settings
from django.core.cache import cache

from core.errors import TooManyConversations, TooManyMessages, TooManyStreams

MINUTE = 60
# What a refusal of another open stream suggests waiting.
STREAM_RETRY_SECONDS = 5
# An open-stream count no stream has touched for this long is dropped (a crashed process
# cannot give its streams back); open streams touch it at least every STREAM_TOUCH_SECONDS.
STREAM_COUNT_TTL = 600
STREAM_TOUCH_SECONDS = 60


def key(*parts) -> str:
    """The cache key of a counter or a lock named by `parts`."""
    return "parley:limit:" + ":".join(str(part) for part in parts)


def _count(name: str, subject, window: int) -> int:
    """Count one event for `subject` in the current window; the count so far."""
    start = int(time.time() // window) * window
    counter = key(name, subject, start)
    cache.add(counter, 0, timeout=window + 5)
    try:
        return cache.incr(counter)
    except ValueError:  # expired between add and incr
        cache.add(counter, 1, timeout=window + 5)
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


def check_conversation_rate(*, user) -> None:
    """Raise TooManyConversations past PARLEY_CONVERSATIONS_PER_MINUTE."""
    wait = count_in_window("conversations", user.pk, settings.PARLEY_CONVERSATIONS_PER_MINUTE)
    if wait is not None:
        raise TooManyConversations(wait)


class StreamSlot:
    """One of the user's PARLEY_MAX_STREAMS open event streams; give it back with release()."""

    def __init__(self, user_id: int) -> None:
        self.key = key("streams", user_id)
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
            raise TooManyStreams(STREAM_RETRY_SECONDS)

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
        until = cache.get(key("login-locked", kind, subject))
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
            cache.add(key("login-locked", kind, subject), time.time() + lockout, timeout=lockout)
