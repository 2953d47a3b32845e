"""Agent providers: one small interface (base.Provider), chosen by AGENT_PROVIDER."""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chat.providers.base import Provider

AVAILABLE = ("scripted",)


def get_provider() -> Provider:
    name = settings.AGENT_PROVIDER
    if name == "scripted":
        from chat.providers.scripted import ScriptedProvider

        return ScriptedProvider(delay=settings.SCRIPTED_AGENT_DELAY)
    raise ImproperlyConfigured(
        f"AGENT_PROVIDER={name!r} is not available; choose one of: {', '.join(AVAILABLE)}."
    )
