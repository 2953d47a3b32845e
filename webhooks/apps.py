from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebhooksConfig(AppConfig):
    """Signed webhooks (Standard Webhooks) for what happens to questions, through a durable
    outbox delivered by every process's sweep."""

    name = "webhooks"
    verbose_name = _("Webhooks")

    def ready(self) -> None:
        from core import jobs
        from questions import notifications
        from webhooks import delivery, services

        notifications.question_changed.connect(services.enqueue, dispatch_uid="webhooks")
        jobs.every_sweep(delivery.deliver_due)
