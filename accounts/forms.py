from django import forms

from accounts.models import Preferences


class PreferencesForm(forms.ModelForm):
    class Meta:
        model = Preferences
        fields = ["theme", "notify_in_browser", "question_expire_after"]
        widgets = {"theme": forms.RadioSelect}


class ThemeForm(forms.ModelForm):
    """The header's theme switch: only the theme changes."""

    class Meta:
        model = Preferences
        fields = ["theme"]
