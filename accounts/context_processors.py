from django.db import DatabaseError

from accounts.models import Theme
from accounts.selectors import preferences_for


def theme(request) -> dict:
    """The theme every page renders with (`<html data-theme>`) and the header switch shows."""
    try:
        current = preferences_for(getattr(request, "user", None)).theme
    except DatabaseError:
        # The error page must render even when the database is what failed.
        current = Theme.SYSTEM
    return {"ui_theme": current}
