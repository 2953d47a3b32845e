from django.conf import settings
from django.core.checks import Error, register

from chat.engine.providers import AVAILABLE


@register()
def agent_provider_check(app_configs, **kwargs):
    if settings.AGENT_PROVIDER in AVAILABLE:
        return []
    return [
        Error(
            f"AGENT_PROVIDER={settings.AGENT_PROVIDER!r} is not available in this version.",
            hint=f"Choose one of: {', '.join(AVAILABLE)}.",
            id="parley.E001",
        )
    ]
