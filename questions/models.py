from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Deadline(models.Model):
    """When a pending question expires (and when its reminder is due), fixed when it was
    asked; the background sweep (questions.expiry) finds the due ones by these indexed columns.
    The question block's `expiresAt` shows the same time; the block stays the source of truth
    for whether the question is still pending."""

    conversation = models.ForeignKey(
        "chat.Conversation",
        on_delete=models.CASCADE,
        related_name="question_deadlines",
        verbose_name=_("conversation"),
    )
    tool_call_id = models.CharField(_("tool call"), max_length=64)
    expires_at = models.DateTimeField(_("expires"))
    # None: no reminder for this question.
    remind_at = models.DateTimeField(_("reminder due"), null=True, blank=True)
    reminded_at = models.DateTimeField(_("reminded"), null=True, blank=True)
    # Set once the question is resolved, whichever way; `expired` when the deadline won.
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)
    expired = models.BooleanField(_("expired"), default=False)

    class Meta:
        verbose_name = _("question deadline")
        verbose_name_plural = _("question deadlines")
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "tool_call_id"], name="question_deadline_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["expires_at"],
                condition=Q(resolved_at__isnull=True),
                name="question_deadline_due",
            ),
            models.Index(
                fields=["remind_at"],
                condition=Q(resolved_at__isnull=True, reminded_at__isnull=True),
                name="question_reminder_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_call_id} @ {self.expires_at:%Y-%m-%d %H:%M:%S}"


class QuestionDraft(models.Model):
    """What the user has chosen or typed in a pending question, not yet sent: restored in
    every tab and device, never an answer by itself, deleted when the question resolves."""

    conversation = models.ForeignKey(
        "chat.Conversation",
        on_delete=models.CASCADE,
        related_name="question_drafts",
        verbose_name=_("conversation"),
    )
    tool_call_id = models.CharField(_("tool call"), max_length=64)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="question_drafts",
        verbose_name=_("user"),
    )
    # One answer per question, as questions.blocks.Answer stores it: {"labels", "custom"}.
    data = models.JSONField(_("draft"), default=list)
    # The page (one tab) that saved it last: other tabs say it is being answered elsewhere.
    client = models.CharField(_("client"), max_length=64, blank=True)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("question draft")
        verbose_name_plural = _("question drafts")
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "tool_call_id"], name="question_draft_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}/{self.tool_call_id}"
