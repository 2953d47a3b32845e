"""Slack: the Parley user each Slack user is (a link they confirmed from Slack), the messages
the bot posted about questions (so that each can be shown closed once the question is), and
the clicks it refused (the audit)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class SlackLink(models.Model):
    """A Parley user's Slack account. Asked for from Settings with a Slack member ID: the bot
    sends that Slack user a "Confirm" button carrying `nonce`, and only a click on it by that
    same Slack user (a signed interaction) sets `confirmed_at`. Only a confirmed link answers
    or receives questions; a Slack user is confirmed for one Parley user at most."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="slack_link",
        verbose_name=_("user"),
    )
    # The workspace (team) and member IDs, as Slack's interactions name them.
    team_id = models.CharField(_("workspace ID"), max_length=32, blank=True)
    slack_user_id = models.CharField(_("Slack member ID"), max_length=32)
    # What the confirmation button carries; a new request replaces it.
    nonce = models.CharField(_("nonce"), max_length=64, unique=True, editable=False)
    requested_at = models.DateTimeField(_("requested"), default=timezone.now)
    confirmed_at = models.DateTimeField(_("confirmed"), null=True, blank=True)

    class Meta:
        verbose_name = _("Slack link")
        verbose_name_plural = _("Slack links")
        constraints = [
            models.UniqueConstraint(
                fields=["slack_user_id"],
                condition=Q(confirmed_at__isnull=False),
                name="slack_link_one_user_per_slack_user",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} = {self.slack_user_id}"

    @property
    def is_confirmed(self) -> bool:
        return self.confirmed_at is not None


class SlackChannel(models.Model):
    """A Slack channel a conversation is connected to by its owner: its questions are posted
    there (the bot must be in it), for its members to answer, instead of to each person's
    direct messages."""

    conversation = models.OneToOneField(
        "chat.Conversation",
        on_delete=models.CASCADE,
        related_name="slack_channel",
        verbose_name=_("conversation"),
    )
    channel_id = models.CharField(_("Slack channel"), max_length=32)
    connected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        verbose_name=_("connected by"),
    )
    connected_at = models.DateTimeField(_("connected"), default=timezone.now)

    class Meta:
        verbose_name = _("Slack channel")
        verbose_name_plural = _("Slack channels")

    def __str__(self) -> str:
        return f"{self.conversation_id} → {self.channel_id}"


class SlackMessage(models.Model):
    """A message the bot posted about a question (to a linked user's direct messages, or to
    the channel its conversation is connected to): where it is, so it can be updated once the
    question no longer waits for them."""

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
    # The conversation (a DM's D… ID) and the message's timestamp, as chat.postMessage answered.
    channel = models.CharField(_("Slack channel"), max_length=32)
    ts = models.CharField(_("timestamp"), max_length=32)
    posted_at = models.DateTimeField(_("posted"), default=timezone.now)
    # Posted to a conversation's channel (for everyone in it), not to `recipient` alone.
    shared = models.BooleanField(_("in a channel"), default=False)
    # When it was last rewritten to say the question was closed (null: it still asks).
    closed_at = models.DateTimeField(_("closed"), null=True, blank=True)

    class Meta:
        verbose_name = _("Slack message")
        verbose_name_plural = _("Slack messages")
        constraints = [
            models.UniqueConstraint(fields=["channel", "ts"], name="slack_message_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.channel}/{self.ts}"


class RefusalReason(models.TextChoices):
    # The Slack user has no confirmed link to a Parley user.
    UNLINKED = "unlinked", _("Slack account not linked")
    # The linked user may read the conversation but not answer (a viewer).
    VIEWER = "viewer", _("Viewer")
    # The linked user is not a member of the conversation (or it is gone).
    NOT_MEMBER = "not_member", _("Not a member")


class SlackRefusal(models.Model):
    """A click or a modal in Slack that answered nothing because its person may not answer:
    the audit of refusals (shown in the admin)."""

    slack_user_id = models.CharField(_("Slack member ID"), max_length=32)
    team_id = models.CharField(_("workspace ID"), max_length=32, blank=True)
    # The linked Parley user, if any.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("user"),
    )
    question = models.ForeignKey(
        "questions.Question",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("question"),
    )
    reason = models.CharField(_("reason"), max_length=20, choices=RefusalReason.choices)
    at = models.DateTimeField(_("at"), default=timezone.now)

    class Meta:
        verbose_name = _("Slack refusal")
        verbose_name_plural = _("Slack refusals")
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(reason__in=RefusalReason.values), name="slack_refusal_reason"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.slack_user_id}: {self.reason}"
