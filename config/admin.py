"""Django's admin site, its login throttled as /login/ is (config.auth)."""

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from config import auth


class ParleyAdminSite(admin.AdminSite):
    login_form = auth.ThrottledAdminAuthenticationForm

    @method_decorator(never_cache)
    @login_not_required
    def login(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        """Django's login view, answered as /login/ answers: a lockout is a 429 with
        Retry-After, and a browser that signed in is remembered (config.auth)."""
        response = super().login(request, extra_context)
        if request.method != "POST":
            return response
        if request.user.is_authenticated and response.status_code == 302:
            auth.remember_device(request, response, request.user.get_username())
            return response
        context = getattr(response, "context_data", None) or {}
        return auth.refuse_if_locked(response, context.get("form"))
