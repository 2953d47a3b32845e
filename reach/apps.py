from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReachConfig(AppConfig):
    """Questions that reach a person away from Parley's pages: e-mail (a choice answered from
    a signed, single-use link) and Web Push, both through the webhooks' outbox."""

    name = "reach"
    verbose_name = _("E-mail and push")

    def ready(self) -> None:
        from accounts import settings_page
        from questions import notifications
        from reach import mail, outbox, push, views
        from webhooks import channels
        from webhooks.models import DeliveryChannel

        notifications.question_changed.connect(outbox.enqueue, dispatch_uid="reach.outbox")
        channels.register(
            DeliveryChannel.EMAIL,
            channels.Channel(prepare=mail.prepare, timeout=mail.attempt_seconds),
        )
        channels.register(
            DeliveryChannel.PUSH, channels.Channel(prepare=push.prepare, gone=push.gone)
        )
        settings_page.add_section(
            settings_page.Section(
                name="reach.push",
                template="reach/settings.html#push",
                order=100,
                slot=settings_page.Slot.NOTIFICATIONS,
                context=views.push_switch,
            )
        )
        settings_page.add_section(
            settings_page.Section(
                name="reach.address", template="reach/settings.html#address", order=100
            )
        )
