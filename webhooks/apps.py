from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebhooksConfig(AppConfig):
    """Signed webhooks (Standard Webhooks) for what happens to questions, through a durable
    outbox delivered by every process's sweep."""

    name = "webhooks"
    verbose_name = _("Webhooks")

    def ready(self) -> None:
        from chat.engine import runner
        from questions import notifications
        from webhooks import delivery, services

        notifications.listen(services.enqueue)
        runner.every_sweep(delivery.deliver_due)
