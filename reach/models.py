"""Reaching a person away from Parley's pages: the single-use links an e-mail's options carry,
and the browsers that asked for Web Push."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AnswerLink(models.Model):
    """One option of a one-question choice, as a link in one recipient's e-mail. The link
    carries this row's id and `nonce`, signed (reach.links); it answers once: `used_at` is
    set by a conditional update in the transaction that answers."""

    question = models.ForeignKey(
        "questions.Question",
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("question"),
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("recipient"),
    )
    # The option's place among the question's options (its label is read from the question).
    option = models.PositiveSmallIntegerField(_("option"))
    nonce = models.CharField(_("nonce"), max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    used_at = models.DateTimeField(_("used"), null=True, blank=True)

    class Meta:
        verbose_name = _("answer link")
        verbose_name_plural = _("answer links")
        constraints = [
            models.UniqueConstraint(
                fields=["question", "recipient", "option"], name="answer_link_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.question_id}/{self.option}"


class PushSubscription(models.Model):
    """A browser that asked for Web Push (Settings, "Notify this browser"): its push
    service's endpoint and the keys a message to it is encrypted with. Deleted when the
    browser turns it off, or when its push service says it is gone (404 or 410)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="push_subscriptions",
        verbose_name=_("user"),
    )
    endpoint = models.URLField(_("endpoint"), max_length=2000, unique=True)
    # The browser's P-256 public key and its authentication secret (base64url, RFC 8291).
    p256dh = models.CharField(_("public key"), max_length=200)
    auth = models.CharField(_("authentication secret"), max_length=100)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("push subscription")
        verbose_name_plural = _("push subscriptions")
        constraints = [
            models.CheckConstraint(
                condition=~Q(p256dh="") & ~Q(auth=""), name="push_subscription_keys"
            )
        ]

    def __str__(self) -> str:
        return self.endpoint[:60]
