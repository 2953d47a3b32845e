"""One row per question an agent outside Parley asked through MCP: which client asked, in which
of its sessions, and whether the answer has reached it. The question itself is an ordinary
questions.Question in a conversation of that client's (chat.models.Agent.EXTERNAL)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AgentCall(models.Model):
    question = models.OneToOneField(
        "questions.Question",
        on_delete=models.CASCADE,
        related_name="agent_call",
        verbose_name=_("question"),
    )
    # The token's user, whom the call asks (the conversation's owner).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    # The client as it named itself when it connected (clientInfo).
    client_name = models.CharField(_("client"), max_length=200)
    client_version = models.CharField(_("client version"), max_length=100, blank=True)
    # The MCP session it asked in (Mcp-Session-Id); blank where the protocol has none.
    session_id = models.CharField(_("session"), max_length=128, blank=True)
    # The tool and its arguments, hashed: the same call made again after the first was lost
    # (a restart, a dropped session) finds this question instead of asking twice.
    fingerprint = models.CharField(_("fingerprint"), max_length=64)
    # The client's own key for this question (`request_key`): the same user calling again
    # with it gets this question and, once resolved, its outcome — never a second question.
    request_key = models.CharField(_("request key"), max_length=200, blank=True)
    # When the answer (or the rejection, or the expiry) was returned to the client.
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True)
    created_at = models.DateTimeField(_("asked"), default=timezone.now)

    class Meta:
        verbose_name = _("agent call")
        verbose_name_plural = _("agent calls")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "request_key"],
                condition=~Q(request_key=""),
                name="agent_call_request_key",
            )
        ]
        indexes = [
            # A call made again: the client's undelivered calls with these arguments.
            models.Index(
                fields=["user", "client_name", "fingerprint"],
                condition=Q(delivered_at__isnull=True),
                name="agent_call_undelivered",
            ),
            # The conversation a session asks in: its newest call.
            models.Index(
                fields=["user", "client_name", "session_id", "-created_at"],
                name="agent_call_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.client_name}: {self.question_id}"
