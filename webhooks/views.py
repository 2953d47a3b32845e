"""The webhooks settings page: register a URL (its secret shown once), delete, enable a
disabled one again, and the delivery log."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from webhooks import selectors, services
from webhooks.addresses import UnsafeUrl


@require_http_methods(["GET", "POST"])
def webhooks(request: HttpRequest) -> HttpResponse:
    new_secret, error, url, status = "", "", "", 200
    if request.method == "POST":
        url = request.POST.get("url", "")
        try:
            _, new_secret = services.create_webhook(user=request.user, url=url)
            url, status = "", 201
        except UnsafeUrl as refused:
            error, status = refused.message, refused.status
    context = {
        "webhooks": selectors.webhooks_for_user(user=request.user),
        "deliveries": selectors.deliveries_for_user(user=request.user),
        "new_secret": new_secret,
        "error": error,
        "url": url,
    }
    return render(request, "webhooks/webhooks.html", context, status=status)


@require_POST
def delete(request: HttpRequest, webhook_id: int) -> HttpResponse:
    services.delete_webhook(user=request.user, webhook_id=webhook_id)
    return redirect("webhooks:settings")


@require_POST
def enable(request: HttpRequest, webhook_id: int) -> HttpResponse:
    services.enable_webhook(user=request.user, webhook_id=webhook_id)
    messages.success(request, _("The webhook is enabled again: events from now on are sent to it."))
    return redirect("webhooks:settings")
