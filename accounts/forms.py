from django import forms
from django.conf import settings
from django.utils.translation import get_language, get_language_info
from django.utils.translation import gettext_lazy as _

from accounts.models import Preferences

# "Questions expire after": the picker's choices, in seconds as Preferences stores them; ""
# keeps the field empty (the server's QUESTION_EXPIRE_AFTER applies), "custom" takes minutes.
SERVER_DEFAULT = ""
CUSTOM = "custom"
EXPIRE_CHOICES = [
    (SERVER_DEFAULT, _("The server’s default")),
    ("0", _("Never")),
    ("900", _("15 minutes")),
    ("3600", _("1 hour")),
    ("86400", _("1 day")),
    (CUSTOM, _("Custom…")),
]
PRESETS = {int(value) for value, _label in EXPIRE_CHOICES if value.isdigit()}
MAX_MINUTES = 525_600  # a year


class PreferencesForm(forms.ModelForm):
    """The settings page's form: the theme, the language (a cookie, as Django's set_language
    keeps it, and stored for e-mail), browser notifications, questions by e-mail, and when
    questions expire."""

    language = forms.ChoiceField(label=_("Language"), choices=settings.LANGUAGES, required=False)
    expire = forms.ChoiceField(
        label=_("Questions expire after"),
        choices=EXPIRE_CHOICES,
        required=False,
        widget=forms.RadioSelect,
    )
    expire_minutes = forms.IntegerField(
        label=_("Minutes"), min_value=1, max_value=MAX_MINUTES, required=False
    )

    class Meta:
        model = Preferences
        fields = ["theme", "notify_in_browser", "email_questions"]
        widgets = {
            "theme": forms.RadioSelect,
            "notify_in_browser": forms.CheckboxInput(attrs={"role": "switch"}),
            "email_questions": forms.CheckboxInput(attrs={"role": "switch"}),
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Each language in its own name, as the login page's switch offers them.
        self.fields["language"].choices = [
            (code, get_language_info(code)["name_local"]) for code, _name in settings.LANGUAGES
        ]
        self.fields["language"].initial = get_language()
        seconds = self.instance.question_expire_after
        if seconds is None:
            self.fields["expire"].initial = SERVER_DEFAULT
        elif seconds in PRESETS:
            self.fields["expire"].initial = str(seconds)
        else:
            self.fields["expire"].initial = CUSTOM
            self.fields["expire_minutes"].initial = -(-seconds // 60)

    def clean(self) -> dict:
        cleaned = super().clean()
        choice = cleaned.get("expire") or SERVER_DEFAULT
        if choice == CUSTOM:
            minutes = cleaned.get("expire_minutes")
            if minutes is None:
                if "expire_minutes" not in self.errors:
                    self.add_error("expire_minutes", _("Enter a number of minutes."))
            else:
                self.instance.question_expire_after = minutes * 60
        else:
            self.instance.question_expire_after = int(choice) if choice else None
        # Kept for what is written to the user away from the pages (e-mail, pushes).
        if cleaned.get("language"):
            self.instance.language = cleaned["language"]
        return cleaned


class ThemeForm(forms.ModelForm):
    """The user menu's theme switch: only the theme changes."""

    class Meta:
        model = Preferences
        fields = ["theme"]
