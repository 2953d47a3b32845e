"""What Parley records of the MCP tools it calls."""

from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class ToolRun(models.Model):
    """A call of an MCP tool that was started: written (and committed) before the call goes
    out, so a turn that takes over after its process died knows the call may have happened,
    and never makes it again. The call's result is in the transcript."""

    conversation = models.ForeignKey(
        "chat.Conversation",
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("conversation"),
    )
    tool_call_id = models.CharField(_("tool call"), max_length=64)
    tool = models.CharField(_("tool"), max_length=200)
    started_at = models.DateTimeField(_("started"), default=timezone.now)

    class Meta:
        verbose_name = _("tool run")
        verbose_name_plural = _("tool runs")
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "tool_call_id"], name="tool_run_call_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.tool_call_id}"

    @classmethod
    def start(cls, conversation_id: int, key: str, tool: str) -> bool:
        """Record that the call (or, with a round's key, that round's retry) goes out now;
        False if it already went out once."""
        try:
            with transaction.atomic():
                cls.objects.create(conversation_id=conversation_id, tool_call_id=key, tool=tool)
        except IntegrityError:
            return False
        return True
