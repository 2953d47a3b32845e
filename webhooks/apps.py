from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebhooksConfig(AppConfig):
    """The outbox of every channel (see the package's docstring): webhooks, and the e-mail
    and Web Push that `reach` registers. It writes a question event's webhook rows and
    delivers every row on each sweep."""

    name = "webhooks"
    verbose_name = _("Webhooks")

    def ready(self) -> None:
        from core import jobs
        from questions import notifications
        from webhooks import delivery, services

        notifications.listen(services.enqueue)
        jobs.every_sweep(delivery.deliver_due)
