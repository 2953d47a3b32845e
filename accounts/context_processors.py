from django.db import DatabaseError
from django.utils.functional import SimpleLazyObject

from accounts.models import Theme
from accounts.selectors import preferences_for


def theme(request) -> dict:
    """The theme every page renders with (`<html data-theme>`) and the header switch shows.
    Read when a template uses it: a fragment htmx swaps in (the composer after each message
    sent) has no `<html>` and no switch, and makes no query for it."""
    return {"ui_theme": SimpleLazyObject(lambda: current_theme(request))}


def current_theme(request) -> str:
    try:
        return preferences_for(getattr(request, "user", None)).theme
    except DatabaseError:
        # The error page must render even when the database is what failed.
        return Theme.SYSTEM
