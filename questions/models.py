from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


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
