from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SlackbotConfig(AppConfig):
    """Questions and approvals answered in Slack: the bot's direct messages, sent and updated
    through the webhooks' outbox (its `slack` channel), and Slack's interactions (the public
    Interactivity URL or Socket Mode) answered through questions.resolving and
    questions.approvals, as every other channel is."""

    name = "slackbot"
    verbose_name = _("Slack")

    def ready(self) -> None:
        from accounts import settings_page
        from chat import sharing
        from questions import notifications
        from slackbot import outbox, views
        from webhooks import channels
        from webhooks.models import DeliveryChannel

        notifications.question_changed.connect(outbox.enqueue, dispatch_uid="slackbot.outbox")
        notifications.question_closed.connect(outbox.enqueue_close, dispatch_uid="slackbot.close")
        sharing.access_changed.connect(outbox.members_changed, dispatch_uid="slackbot.members")
        channels.register(
            DeliveryChannel.SLACK,
            channels.Channel(prepare=outbox.prepare, delivered=outbox.delivered),
        )
        settings_page.add_section(
            settings_page.Section(
                name="slackbot.link",
                template="slackbot/settings.html#link",
                order=150,
                context=views.link_section,
            )
        )
