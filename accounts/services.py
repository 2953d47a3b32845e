"""Account writes: signing a user out everywhere.

Sessions are the account's own; other credentials (API tokens) and the live pages that must
close belong to apps above this one, which receive accounts.signals.signed_out_everywhere.
"""

from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.signals import signed_out_everywhere


@transaction.atomic
def sign_out_everywhere(*, user) -> int:
    """End every session `user` is signed in with, in any browser, and whatever the
    receivers of signed_out_everywhere end (API tokens; after commit, open websockets and
    event streams close). The caller's own request still holds its session object: log it out too.
    Returns how many sessions ended."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    keys = sessions_of(user, store.get_model_class())
    for key in keys:
        store(key).delete()  # through the engine, so a cached copy goes too
    signed_out_everywhere.send(sender=sign_out_everywhere, user=user)
    return len(keys)


def sessions_of(user, session_model) -> list[str]:
    """The keys of the unexpired sessions signed in as `user`. Sessions are not indexed by
    user: each is decoded (as Zulip does), which a rare, deliberate action can afford."""
    user_id = user._meta.pk.value_to_string(user)  # as django.contrib.auth.login stores it
    rows = (
        session_model.objects.filter(expire_date__gt=timezone.now())
        .only("session_key", "session_data")
        .iterator(chunk_size=1000)
    )
    return [row.session_key for row in rows if row.get_decoded().get(SESSION_KEY) == user_id]


def add_user(*, username: str, password: str, password_again: str):
    """A new account that signs in with `password`, checked as the admin's "Add user" form
    checks it (Django's UserCreationForm: a free, valid username, matching passwords that the
    AUTH_PASSWORD_VALIDATORS accept). Raises ValidationError saying what is wrong."""
    form = UserCreationForm(
        {"username": username, "password1": password, "password2": password_again}
    )
    if not form.is_valid():
        raise ValidationError([error for errors in form.errors.values() for error in errors])
    return form.save()
