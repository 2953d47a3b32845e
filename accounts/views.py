"""The settings page: the user's preferences and signing out everywhere (the sections other
apps add to it: accounts.settings_page)."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import activate, get_language, gettext_lazy
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from accounts import services, settings_page
from accounts.forms import PreferencesForm, ThemeForm
from accounts.selectors import preferences_for

THEME_SWITCH = "accounts/theme_switch.html"
SIGNED_OUT_EVERYWHERE = gettext_lazy(
    "You are signed out everywhere: every session of your account has ended and every API "
    "token is revoked. Log in again to go on."
)


@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    """The Settings page; a POST saves the preferences form. From the page (htmx: a control
    changed) the answer is the saved form, or the refused one with its errors (400), and the
    page's status says which; a new language reloads the page in it."""
    shown_in = get_language()  # the page's language (the cookie's, as LocaleMiddleware read it)
    form = PreferencesForm(request.POST or None, instance=preferences_for(request.user))
    if request.method != "POST":
        return settings_page.render(request, form=form)
    if not form.is_valid():
        if request.htmx:
            response = settings_page.render(
                request, form=form, status=400, template=settings_page.FORM
            )
            return with_status(response, _("Not saved: correct the field marked above."))
        return settings_page.render(request, form=form, status=400)
    form.save()
    language = form.cleaned_data["language"] or get_language()
    # The saved message is said in the language just chosen.
    activate(language)
    if request.htmx and language == shown_in:
        response = settings_page.render(request, template=settings_page.FORM)
        return with_status(response, _("Settings saved."))
    messages.success(request, _("Settings saved."))
    response = redirect("accounts:preferences")
    if request.htmx:
        response = HttpResponse(headers={"HX-Refresh": "true"})  # the page in its new language
    remember_language(response, language)
    return response


def with_status(response: HttpResponse, text: str) -> HttpResponse:
    """`response` (the form htmx swaps in) with `text` for the page's status, out of band."""
    response.content += render_to_string("accounts/settings_status.html", {"text": text}).encode()
    return response


def remember_language(response: HttpResponse, language: str) -> None:
    """The language cookie LocaleMiddleware reads, set as Django's set_language sets it."""
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE,
    )


@require_POST
def theme(request: HttpRequest) -> HttpResponse:
    """The user menu's theme switch: save the choice, then show the page again in it."""
    form = ThemeForm(request.POST, instance=preferences_for(request.user))
    if not form.is_valid():
        message = _("Choose one of the themes offered.")
        if request.htmx:
            # The switch again, with the refusal in it (no empty alert waits on every page).
            return render(request, THEME_SWITCH, {"theme_error": message}, status=400)
        return render(request, "error.html", {"status": 400, "message": message}, status=400)
    form.save()
    if request.htmx:
        return render(request, THEME_SWITCH)
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = "/"
    return redirect(next_url)


@require_POST
def sign_out_everywhere(request: HttpRequest) -> HttpResponse:
    """End every session of the user (this one too) and revoke their API tokens."""
    services.sign_out_everywhere(user=request.user)
    logout(request)
    messages.success(request, SIGNED_OUT_EVERYWHERE)
    return redirect("login")
