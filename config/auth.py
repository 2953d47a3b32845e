"""The login form, throttled per account and per client address (chat.limits)."""

from django import forms
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core import signing
from django.utils.translation import gettext_lazy as _

from chat import limits

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


class ThrottledAuthenticationForm(AuthenticationForm):
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


def known_device(request) -> str | None:
    """The account this browser signed in to before (a signed cookie), if any."""
    try:
        return request.get_signed_cookie(
            DEVICE_COOKIE, salt=DEVICE_SALT, max_age=DEVICE_MAX_AGE, default=None
        )
    except signing.BadSignature:
        return None


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm

    def form_valid(self, form):
        response = super().form_valid(form)
        response.set_signed_cookie(
            DEVICE_COOKIE,
            limits.account_key(form.get_user().get_username()),
            salt=DEVICE_SALT,
            max_age=DEVICE_MAX_AGE,
            httponly=True,
            samesite="Lax",
            secure=self.request.is_secure(),
        )
        return response

    def form_invalid(self, form):
        response = super().form_invalid(form)
        locked = getattr(form, "locked_for", None)
        if locked:
            response.status_code = 429
            response["Retry-After"] = str(locked)
        return response
