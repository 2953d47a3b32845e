from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = _("Chat")

    def ready(self) -> None:
        from chat import checks  # noqa: F401 - registers the system checks
        from chat.sessions import connect_signals

        connect_signals()
