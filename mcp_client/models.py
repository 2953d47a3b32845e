"""What Parley records of the MCP tools it calls."""

from django.conf import settings
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


class SignIn(models.Model):
    """A user's own account on an MCP server that asks each user to sign in (`"auth": "oauth"`
    in MCP_CONFIG): the client Parley is at its authorization server and the user's tokens,
    sealed at rest (core.sealed), and the tools it listed for them. Only their turns use it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="mcp_sign_ins",
        verbose_name=_("user"),
    )
    server = models.CharField(_("server"), max_length=40)
    # {"client": the client's registration (RFC 7591 fields), "tokens": the token response}.
    sealed = models.TextField(_("sealed credentials"), editable=False)
    token_endpoint = models.URLField(_("token endpoint"), max_length=2000, editable=False)
    # The resource the tokens are bound to (RFC 8707), sent again with each refresh.
    resource = models.URLField(_("resource"), max_length=2000, blank=True, editable=False)
    expires_at = models.DateTimeField(_("access expires"), null=True, blank=True)
    tools = models.JSONField(_("tools"), default=list, blank=True, editable=False)
    connected_at = models.DateTimeField(_("connected"), default=timezone.now)
    refreshed_at = models.DateTimeField(_("refreshed"), null=True, blank=True)
    # Why the user must connect again ("" while the sign-in works): a code of
    # mcp_client.signin.PROBLEMS (the server refused the token, the refresh failed, …).
    problem = models.CharField(_("problem"), max_length=300, blank=True)

    class Meta:
        verbose_name = _("MCP sign-in")
        verbose_name_plural = _("MCP sign-ins")
        constraints = [
            models.UniqueConstraint(fields=["user", "server"], name="mcp_sign_in_unique")
        ]

    def __str__(self) -> str:
        return f"{self.server} ({self.user_id})"
