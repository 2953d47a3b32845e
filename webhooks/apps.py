from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save
from django.utils.translation import gettext_lazy as _


class WebhooksConfig(AppConfig):
    """The outbox of every channel (see the package's docstring): webhooks, and the e-mail
    and Web Push that `reach` registers. It writes a question event's webhook rows and
    delivers every row on each sweep."""

    name = "webhooks"
    verbose_name = _("Webhooks")

    def ready(self) -> None:
        from accounts import settings_page
        from core import jobs
        from questions import notifications
        from webhooks import delivery, selectors, services

        notifications.question_changed.connect(services.enqueue, dispatch_uid="webhooks")
        webhook = self.get_model("Webhook")
        for signal in (post_save, post_delete):
            signal.connect(selectors.webhooks_changed, sender=webhook, dispatch_uid="webhooks")
        jobs.every_sweep(delivery.deliver_due)
        settings_page.add_link(
            settings_page.Link(
                name="webhooks.settings",
                label=_("Webhooks"),
                description=_("Tell another service when a question is asked or answered."),
                url_name="webhooks:settings",
                order=200,
            )
        )
