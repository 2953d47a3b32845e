from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class DisabledReason(models.TextChoices):
    # The receiver answered 410 Gone: it asks for no more deliveries (Standard Webhooks).
    GONE = "gone", _("Its receiver answered 410 Gone, which asks for no more deliveries.")


class Webhook(models.Model):
    """A URL that gets a signed POST for each question event of its owner (or, without an
    owner, of every user: only admins add those). While disabled, no event is queued for it,
    and what was waiting is given up; its owner (or an admin) may enable it again."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="webhooks",
        verbose_name=_("owner"),
        help_text=_("Leave empty to send every user's question events to this URL."),
    )
    url = models.URLField(_("URL"), max_length=2000)
    # The signing key, `whsec_<base64>` (Standard Webhooks); shown once, when created.
    secret = models.CharField(_("secret"), max_length=100, editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    disabled_at = models.DateTimeField(_("disabled"), null=True, blank=True, editable=False)
    disabled_reason = models.CharField(
        _("why disabled"),
        max_length=20,
        choices=DisabledReason.choices,
        blank=True,
        editable=False,
    )

    class Meta:
        verbose_name = _("webhook")
        verbose_name_plural = _("webhooks")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(disabled_at__isnull=True, disabled_reason="")
                | Q(disabled_at__isnull=False, disabled_reason__in=DisabledReason.values),
                name="webhook_disabled_with_reason",
            )
        ]

    def __str__(self) -> str:
        return self.url


class DeliveryStatus(models.TextChoices):
    # Waiting for its first attempt or its next retry.
    PENDING = "pending", _("Pending")
    # The receiver answered 2xx.
    DELIVERED = "delivered", _("Delivered")
    # Every attempt failed, or the receiver answered 410 Gone; no more retries.
    FAILED = "failed", _("Failed")
    # Never sent, or not again: its webhook was disabled while it waited.
    GIVEN_UP = "given_up", _("Not sent: webhook disabled")
    # Not sent: by its attempt, nothing waited any more (the question was resolved first,
    # or the push subscription or e-mail address was removed).
    SKIPPED = "skipped", _("Not sent: no longer needed")


class DeliveryChannel(models.TextChoices):
    """Where a delivery goes. Webhooks are sent here; the other channels' senders are
    registered by the apps that own them (webhooks.channels)."""

    # A signed POST to one of the owner's webhooks (Standard Webhooks).
    WEBHOOK = "webhook", _("Webhook")
    # An e-mail to the recipient's address.
    EMAIL = "email", _("E-mail")
    # A Web Push message to one of the recipient's browsers.
    PUSH = "push", _("Web Push")
    # A Slack message (the Slack app's bot: slackbot), posted or updated for the recipient.
    SLACK = "slack", _("Slack")


class Delivery(models.Model):
    """One event for one receiver: the outbox row written in the transaction that made the
    event, then delivered (at least once) and retried with backoff by the sweep. A webhook
    delivery names its webhook; an e-mail or a push names its recipient and `target`."""

    channel = models.CharField(
        _("channel"),
        max_length=10,
        choices=DeliveryChannel.choices,
        default=DeliveryChannel.WEBHOOK,
    )
    webhook = models.ForeignKey(
        Webhook,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="deliveries",
        verbose_name=_("webhook"),
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("recipient"),
    )
    # What the channel's sender reads to find where it goes (a push: the subscription's id).
    target = models.CharField(_("target"), max_length=200, blank=True)
    # Sent as `webhook-id` on every attempt: receivers deduplicate by it.
    event_id = models.CharField(_("event id"), max_length=64, unique=True)
    event_type = models.CharField(_("event type"), max_length=40)
    # The exact JSON text that is signed and sent.
    body = models.TextField(_("body"))
    status = models.CharField(
        _("status"), max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    next_attempt_at = models.DateTimeField(_("next attempt"), default=timezone.now)
    last_status_code = models.PositiveIntegerField(_("last status code"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True)

    class Meta:
        verbose_name = _("delivery")
        verbose_name_plural = _("deliveries")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="webhook_delivery_due",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=DeliveryStatus.values), name="webhook_delivery_status"
            ),
            models.CheckConstraint(
                condition=Q(channel=DeliveryChannel.WEBHOOK, webhook__isnull=False)
                | Q(
                    channel__in=[
                        DeliveryChannel.EMAIL,
                        DeliveryChannel.PUSH,
                        DeliveryChannel.SLACK,
                    ],
                    webhook__isnull=True,
                    recipient__isnull=False,
                ),
                name="webhook_delivery_channel",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id}"
