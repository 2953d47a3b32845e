"""Per-user preferences: one row per user, saved the first time the user saves Settings (until
then, accounts.selectors.preferences_for gives the defaults)."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Theme(models.TextChoices):
    SYSTEM = "system", _("Follow the system")
    LIGHT = "light", _("Light")
    DARK = "dark", _("Dark")


class Preferences(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="preferences",
        verbose_name=_("user"),
    )
    theme = models.CharField(_("theme"), max_length=10, choices=Theme.choices, default=Theme.SYSTEM)
    notify_in_browser = models.BooleanField(
        _("browser notifications"),
        default=False,
        help_text=_("Notify me when a question is asked while Parley's tab is in the background."),
    )
    # Defaults in the database too: rows written by code that predates a column (a process
    # of the previous release during an upgrade) still insert.
    email_questions = models.BooleanField(
        _("Email me questions"),
        default=False,
        db_default=False,
        help_text=_(
            "Each question the agent asks you is e-mailed to you; a choice can be answered "
            "from the e-mail."
        ),
    )
    # The language mail is written in: the one last chosen in Settings (pages read the cookie).
    language = models.CharField(_("language"), max_length=10, blank=True, default="", db_default="")
    # Seconds; empty: the server's QUESTION_EXPIRE_AFTER applies.
    question_expire_after = models.PositiveIntegerField(
        _("questions expire after (seconds)"),
        null=True,
        blank=True,
        help_text=_("Leave empty to use the server's setting; 0 means never."),
    )

    class Meta:
        verbose_name = _("preferences")
        verbose_name_plural = _("preferences")

    def __str__(self) -> str:
        return str(self.user)
