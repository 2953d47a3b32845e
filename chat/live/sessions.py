"""A session ends everywhere at once: logout, a password change, deactivation, token
revocation and signing out everywhere close the user's open websockets and event streams.

Django's own auth decides whether a session is still good (`django.contrib.auth.get_user`:
the session's user, its session auth hash — which changes with the password — and an active
account). Streams re-check before every push, at least every AUTH_RECHECK_SECONDS, and at once
when their user's group (`user.<id>`) gets `auth.changed`, which is sent after commit when
Django's auth reports a logout or the user row's password or activity changes (Django's auth
emits these as signals, so this boundary listens to them), when a token is revoked, and when
the user signs out everywhere (accounts.services).
"""

import hashlib
import threading
import time
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import get_user, get_user_model, user_logged_out
from django.db.models.signals import post_delete, post_save

from accounts.signals import signed_out_everywhere
from core import events

# How often an open stream re-reads its credential even when no event says it changed.
AUTH_RECHECK_SECONDS = 1.0


def session_digest(session_key: str | None) -> str:
    """What events carry instead of a session key (they may cross Redis)."""
    return hashlib.sha256((session_key or "").encode()).hexdigest()


def session_user_id(session_key: str | None) -> int | None:
    """The id of the user `session_key` is still signed in as, by Django's rules, or None."""
    if not session_key:
        return None
    engine = import_module(settings.SESSION_ENGINE)
    request = SimpleNamespace(session=engine.SessionStore(session_key))
    user = get_user(request)
    return user.pk if user.is_authenticated and user.is_active else None


def session_still_valid(session_key: str | None, user_id: int) -> bool:
    return session_user_id(session_key) == user_id


class SessionReads:
    """This process's latest read of each session, shared by the session's open sockets.

    A page has two sockets (its conversation's and the live channel), and a person often has
    several tabs: each would read the same session every AUTH_RECHECK_SECONDS while pushes
    come. A read another socket of the session made within that time answers for it too
    (an ended session is still noticed within AUTH_RECHECK_SECONDS of the last good read), so
    a process reads each session about once a beat, whatever its number of sockets;
    `auth.changed` still makes each socket read afresh. Reads too old to answer are dropped
    as new ones come."""

    def __init__(self) -> None:
        self.reads: dict[str, tuple[float, int | None]] = {}
        self.lock = threading.Lock()
        self.prune_at = 64

    def recent(self, session_key: str) -> tuple[float, int | None] | None:
        """(when it was read, by time.monotonic(); the user id it signed in, or None), if
        read within the last AUTH_RECHECK_SECONDS."""
        with self.lock:
            read = self.reads.get(session_key)
        if read is not None and time.monotonic() - read[0] < AUTH_RECHECK_SECONDS:
            return read
        return None

    def read(self, session_key: str) -> tuple[float, int | None]:
        """Read the session now (session_user_id), and keep the read for the other sockets."""
        read = (time.monotonic(), session_user_id(session_key))  # the time before the read
        with self.lock:
            self.reads[session_key] = read
            if len(self.reads) >= self.prune_at:
                stale = read[0] - AUTH_RECHECK_SECONDS
                self.reads = {k: r for k, r in self.reads.items() if r[0] > stale}
                self.prune_at = max(64, 2 * len(self.reads))
        return read


session_reads = SessionReads()


def ended_here(event: dict, session_key: str | None) -> bool:
    """Whether an `auth.changed` event names this very session as ended (a logout)."""
    return bool(session_key) and event.get("session") == session_digest(session_key)


def _logged_out(sender, request, user, **kwargs) -> None:
    if user is None:
        return
    # Sent before the session is flushed: name it, so its streams end without re-reading.
    session = session_digest(getattr(request.session, "session_key", None))
    events.send_on_commit(events.user_group(user.pk), events.auth_changed(user.pk, session=session))


def _user_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created:
        return
    if update_fields is not None and not {"password", "is_active"} & set(update_fields):
        return  # e.g. last_login on every sign-in
    events.send_on_commit(events.user_group(instance.pk), events.auth_changed(instance.pk))


def _user_deleted(sender, instance, **kwargs) -> None:
    events.send_on_commit(events.user_group(instance.pk), events.auth_changed(instance.pk))


def _signed_out_everywhere(sender, *, user, **kwargs) -> None:
    events.send_on_commit(events.user_group(user.pk), events.auth_changed(user.pk))


def connect_signals() -> None:
    """Called from ChatConfig.ready()."""
    user_model = get_user_model()
    user_logged_out.connect(_logged_out, dispatch_uid="parley-logged-out")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="parley-user-saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="parley-user-deleted")
    signed_out_everywhere.connect(_signed_out_everywhere, dispatch_uid="parley-signed-out")
