"""The login forms, /login/ and the admin's (config.admin), throttled per account and per
client address (core.limits): a failure on either counts on both."""

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from core import limits

DEVICE_COOKIE = "parley_device"
DEVICE_SALT = "parley.login.device"
DEVICE_MAX_AGE = 365 * 24 * 3600


class LockedOut(forms.ValidationError):
    def __init__(self, seconds: int) -> None:
        minutes = max(1, (seconds + 59) // 60)
        super().__init__(
            _("Too many failed logins. Try again in %(minutes)s minutes.") % {"minutes": minutes},
            code="locked_out",
        )
        self.seconds = seconds


class LoginThrottle:
    """Refuses a login while its account or address is locked out, before the password is
    checked (the form's `locked_for` then holds the seconds left), and counts every refused
    login. Mixed into an AuthenticationForm, ahead of it."""

    request: HttpRequest
    cleaned_data: dict

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = self.request.META.get("REMOTE_ADDR", "")
        device = known_device(self.request)
        locked = limits.login_locked_for(username=username, address=address, device=device)
        if locked:
            self.locked_for = locked
            raise LockedOut(locked)
        try:
            return super().clean()
        except forms.ValidationError:
            limits.login_failed(username=username, address=address, device=device)
            raise


class ThrottledAuthenticationForm(LoginThrottle, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(LoginThrottle, AdminAuthenticationForm):
    pass


def known_device(request) -> str | None:
    """The account this browser signed in to before (a signed cookie), if any."""
    try:
        return request.get_signed_cookie(
            DEVICE_COOKIE, salt=DEVICE_SALT, max_age=DEVICE_MAX_AGE, default=None
        )
    except signing.BadSignature:
        return None


def remember_device(request: HttpRequest, response: HttpResponse, username: str) -> None:
    """Mark this browser as one that signed in to `username` (core.limits: the account's
    lockout does not hold it)."""
    response.set_signed_cookie(
        DEVICE_COOKIE,
        limits.account_key(username),
        salt=DEVICE_SALT,
        max_age=DEVICE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=request.is_secure(),
    )


def refuse_if_locked(response: HttpResponse, form) -> HttpResponse:
    """The page of a login refused by a lockout is a 429 that says when to try again."""
    locked = getattr(form, "locked_for", None)
    if locked:
        response.status_code = 429
        response["Retry-After"] = str(locked)
    return response


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm

    def form_valid(self, form):
        response = super().form_valid(form)
        remember_device(self.request, response, form.get_user().get_username())
        return response

    def form_invalid(self, form):
        return refuse_if_locked(super().form_invalid(form), form)
