"""Who calls the API and how: a Bearer token or the browser's session (django-ninja's auth),
the credential a wait or an event stream checks again, and the channel (the API or the
terminal client) the audit records for an answer."""

from functools import partial

from django.http import HttpRequest
from django.utils.translation import gettext as _
from ninja.errors import HttpError
from ninja.security import HttpBearer, SessionAuth

from api.events import Credential
from api.tokens import token_record, token_still_valid
from chat.live.sessions import session_still_valid
from questions.payloads import API, TERMINAL, Via

# The terminal client (`manage.py chat`) names itself in this header; the audit then records
# its answers as given through the terminal rather than the API.
CLIENT_HEADER = "X-Parley-Client"
TERMINAL_CLIENT = "terminal"


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        record = token_record(token)
        if record is None:
            return None
        request.user = record.user
        request.api_token_id = record.pk  # event streams re-check it (api.events)
        return record.user


class Session(SessionAuth):
    """The browser's session. Only a request that carries a session cookie and no
    Authorization header is one: a wrong token is a 401, not a CSRF failure."""

    def __call__(self, request: HttpRequest):
        if "Authorization" in request.headers or not request.COOKIES.get(self.param_name):
            return None
        try:
            return super().__call__(request)
        except HttpError:
            raise HttpError(
                403, _("CSRF check failed: send the X-CSRFToken header with the session.")
            ) from None


def channel(request) -> Via:
    """The channel a question is answered through, for the audit (answeredVia)."""
    return TERMINAL if request.headers.get(CLIENT_HEADER) == TERMINAL_CLIENT else API


def credential_check(request) -> Credential:
    """How an event stream re-checks what authenticated it: the Bearer token, or the session."""
    token_id = getattr(request, "api_token_id", None)
    if token_id is not None:
        return Credential(user_id=request.user.pk, still_valid=partial(token_still_valid, token_id))
    session_key = request.session.session_key
    return Credential(
        user_id=request.user.pk,
        still_valid=partial(session_still_valid, session_key, request.user.pk),
        session_key=session_key,
    )
