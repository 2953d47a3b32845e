"""Agent providers: one small interface (base.Provider), chosen by AGENT_PROVIDER."""

import asyncio
import importlib
import weakref
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chat.engine.providers.base import Provider

AVAILABLE = ("scripted", "openai", "anthropic")

SYSTEM_PROMPT = (
    "You are the assistant inside Parley, a chat app. Answer clearly and concisely in the "
    "user's language, using markdown where it helps. Use the tools you are given when they "
    "help; never invent their results."
)


def scripted_agent_script() -> Path:
    from chat.engine.providers.scripted import DEFAULT_SCRIPT

    return Path(settings.SCRIPTED_AGENT_SCRIPT or DEFAULT_SCRIPT)


def suggestions() -> list[str]:
    """Messages to try first: the scripted agent's script lists those it answers; other
    agents answer anything, so there is no list."""
    if settings.AGENT_PROVIDER != "scripted":
        return []
    from chat.engine.providers.scripted import load_suggestions

    return load_suggestions(scripted_agent_script())


# Providers built, per event loop and configuration: a provider holds an SDK client with its
# HTTP connection pool (bound to the loop it runs on), and building one costs more than a
# model's first token (TLS contexts, the SDK's setup), so each process reuses its own.
_built: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, Provider]] = (
    weakref.WeakKeyDictionary()
)


def get_provider() -> Provider:
    """The configured provider, built once per event loop and configuration."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return build_provider()  # no loop to share a client on
    return provider_for(loop)


def provider_for(loop: asyncio.AbstractEventLoop) -> Provider:
    """The configured provider of the turns that run on `loop`, built on first use."""
    key = configuration()
    providers = _built.setdefault(loop, {})
    if key not in providers:
        providers[key] = build_provider()
    return providers[key]


MODULES = {
    "scripted": "chat.engine.providers.scripted",
    "openai": "chat.engine.providers.openai",
    "anthropic": "chat.engine.providers.anthropic",
}


def preload(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Import the configured provider's module and SDK now (a second or more for openai and
    anthropic), so the first turn does not do it on the event loop, stalling every request
    and socket of the process meanwhile. With `loop` (the process's runner loop), also build
    the provider its turns will use: the SDK client's setup (its TLS context, its transport)
    took the first turn after every start ~45 ms on the loop (~125 ms on a busy one). Called
    in a thread when a process starts serving; a client is bound to a loop only by its
    first request."""
    if module := MODULES.get(settings.AGENT_PROVIDER):
        importlib.import_module(module)
    if loop is not None:
        provider_for(loop)


def configuration() -> tuple:
    """Every setting a provider is built from."""
    names = (
        "AGENT_PROVIDER",
        "AGENT_MODEL",
        "AGENT_REQUEST_TIMEOUT",
        "SCRIPTED_AGENT_SCRIPT",
        "SCRIPTED_AGENT_DELAY",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
    )
    return tuple(getattr(settings, name) for name in names)


def build_provider() -> Provider:
    name = settings.AGENT_PROVIDER
    common = {
        "model": settings.AGENT_MODEL,
        "system": SYSTEM_PROMPT,
        "timeout": settings.AGENT_REQUEST_TIMEOUT,
    }
    if name == "scripted":
        from chat.engine.providers.scripted import ScriptedProvider

        return ScriptedProvider(script=scripted_agent_script(), delay=settings.SCRIPTED_AGENT_DELAY)
    if name == "openai":
        from chat.engine.providers.openai import OpenAIProvider

        return OpenAIProvider(
            base_url=settings.OPENAI_BASE_URL, api_key=settings.OPENAI_API_KEY, **common
        )
    if name == "anthropic":
        from chat.engine.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            base_url=settings.ANTHROPIC_BASE_URL, api_key=settings.ANTHROPIC_API_KEY, **common
        )
    raise ImproperlyConfigured(
        f"AGENT_PROVIDER={name!r} is not available; choose one of: {', '.join(AVAILABLE)}."
    )
