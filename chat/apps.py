from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = _("Chat")

    def ready(self) -> None:
        from chat import checks, services  # noqa: F401 - checks registers the system checks
        from chat.engine import builtin, subagents, tools
        from chat.live.sessions import connect_signals
        from core import jobs

        for tool in [*builtin.TOOLS, subagents.SpawnAgents()]:
            tools.register(tool)
        connect_signals()
        jobs.every_sweep(services.purge_deleted)
