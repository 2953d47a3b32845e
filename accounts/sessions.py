"""The session engine (settings.SESSION_ENGINE): Django's database sessions, with the read
that every request, and every open socket's re-check (chat.sessions), starts with compiled to
SQL once instead of on every call (chat.compiled)."""

from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.compiled import CompiledQuery

_SESSION = CompiledQuery(lambda session_key: Session.objects.filter(session_key=session_key))


class SessionStore(db.SessionStore):
    def _get_session_from_db(self) -> Session | None:
        """The stored session, unless it is missing or expired (as Django's, which asks the
        database for an expiry after now: the same rows, compared here)."""
        key = self.session_key
        session = _SESSION.first(session_key=key) if key else None
        if session is None or session.expire_date <= timezone.now():
            self._session_key = None
            return None
        return session
