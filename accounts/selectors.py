from accounts.models import Preferences


def preferences_for(user) -> Preferences:
    """The user's preferences; defaults (unsaved) for a user who never changed them."""
    if not getattr(user, "is_authenticated", False):
        return Preferences()
    try:
        return user.preferences
    except Preferences.DoesNotExist:
        return Preferences(user=user)
