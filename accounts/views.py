"""The settings page: the user's preferences, with links to tokens and webhooks."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from accounts.forms import PreferencesForm
from accounts.selectors import preferences_for


@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    form = PreferencesForm(request.POST or None, instance=preferences_for(request.user))
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, _("Settings saved."))
            return redirect("accounts:preferences")
        return render(request, "accounts/preferences.html", {"form": form}, status=400)
    return render(request, "accounts/preferences.html", {"form": form})
