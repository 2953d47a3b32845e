"""Agent providers: one small interface (base.Provider), chosen by AGENT_PROVIDER."""

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chat.providers.base import Provider

AVAILABLE = ("scripted", "openai", "anthropic")

SYSTEM_PROMPT = (
    "You are the assistant inside Parley, a chat app. Answer clearly and concisely in the "
    "user's language, using markdown where it helps. Use the tools you are given when they "
    "help; never invent their results."
)


def scripted_agent_script() -> Path:
    from chat.providers.scripted import DEFAULT_SCRIPT

    return Path(settings.SCRIPTED_AGENT_SCRIPT or DEFAULT_SCRIPT)


def suggestions() -> list[str]:
    """Messages to try first: the scripted agent's script lists those it answers; other
    agents answer anything, so there is no list."""
    if settings.AGENT_PROVIDER != "scripted":
        return []
    from chat.providers.scripted import load_suggestions

    return load_suggestions(scripted_agent_script())


def get_provider() -> Provider:
    name = settings.AGENT_PROVIDER
    common = {
        "model": settings.AGENT_MODEL,
        "system": SYSTEM_PROMPT,
        "timeout": settings.AGENT_REQUEST_TIMEOUT,
    }
    if name == "scripted":
        from chat.providers.scripted import ScriptedProvider

        return ScriptedProvider(script=scripted_agent_script(), delay=settings.SCRIPTED_AGENT_DELAY)
    if name == "openai":
        from chat.providers.openai import OpenAIProvider

        return OpenAIProvider(
            base_url=settings.OPENAI_BASE_URL, api_key=settings.OPENAI_API_KEY, **common
        )
    if name == "anthropic":
        from chat.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            base_url=settings.ANTHROPIC_BASE_URL, api_key=settings.ANTHROPIC_API_KEY, **common
        )
    raise ImproperlyConfigured(
        f"AGENT_PROVIDER={name!r} is not available; choose one of: {', '.join(AVAILABLE)}."
    )
