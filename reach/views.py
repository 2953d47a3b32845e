"""An e-mail's answer links (no login: the signed link is the credential), the service
worker, this browser's push subscription and the user's e-mail address (Settings: reach's
sections of it are added in reach/apps.py)."""

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from accounts import settings_page
from accounts.selectors import preferences_for
from core.errors import RateLimited
from questions.selectors import context_line, question_url
from reach import addresses, links, push
from reach.errors import (
    BadLink,
    BadSubscription,
    LinkRevoked,
    LinkUsed,
    QuestionClosed,
    UnknownLink,
)

ANSWER_PAGE = "reach/answer.html"


@login_not_required
@never_cache
@require_http_methods(["GET", "POST"])
def answer(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the question and the link's answer with "Confirm answer" (mail scanners
    open links: a GET never answers); POST answers, once."""
    try:
        if request.method == "POST":
            opened = links.answer_by_link(token=token)
        else:
            opened = links.open_link(token)
    except (BadLink, UnknownLink, LinkRevoked, LinkUsed, QuestionClosed) as refused:
        return render(request, ANSWER_PAGE, {"refused": refused.message}, status=refused.status)
    question = opened.question
    language = preferences_for(opened.link.recipient).language
    if language and not request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME):
        translation.activate(language)  # the recipient's, as their e-mail was written
    context = {
        "asked": question.request.questions[0],
        "label": opened.label,
        "conversation_title": str(question.conversation),
        "context_line": context_line(question.message),
        "conversation_url": question_url(question),
        "answered": request.method == "POST",
    }
    return render(request, ANSWER_PAGE, context)


@login_not_required
def service_worker(request: HttpRequest) -> HttpResponse:
    """The service worker, at the site's root so that its scope is the whole site."""
    response = render(request, "reach/sw.js", content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    return response


def push_switch(request: HttpRequest) -> dict:
    """What Settings' "Notify this browser" switch needs (reach/settings.html#push)."""
    return {"vapid_public_key": settings.VAPID_PUBLIC_KEY}


@require_POST
def subscribe(request: HttpRequest) -> HttpResponse:
    """Save this browser's PushSubscription (its toJSON(), as the request's JSON body)."""
    try:
        push.subscribe(user=request.user, data=json.loads(request.body or b"null"))
    except (ValueError, BadSubscription) as refused:
        message = getattr(refused, "message", BadSubscription.default_message)
        return JsonResponse({"message": str(message)}, status=BadSubscription.status)
    return JsonResponse({}, status=201)


@require_POST
def unsubscribe(request: HttpRequest) -> HttpResponse:
    """Forget this browser (`{"endpoint"}`): it gets no more pushes."""
    try:
        endpoint = str(json.loads(request.body or b"{}").get("endpoint", ""))
    except (ValueError, AttributeError):
        endpoint = ""
    push.unsubscribe(user=request.user, endpoint=endpoint)
    return HttpResponse(status=204)


@require_POST
def change_address(request: HttpRequest) -> HttpResponse:
    """Mail a link that confirms the address typed (Settings, "E-mail address"); the address
    changes only when that link is opened and confirmed."""
    typed = request.POST.get("email", "")
    try:
        address = addresses.request_change(user=request.user, address=typed)
    except (addresses.AddressRefused, RateLimited) as refused:
        shown = {"address": typed, "address_error": refused.message}
        response = settings_page.render(request, status=refused.status, shown=shown)
        if isinstance(refused, RateLimited):
            response["Retry-After"] = str(refused.retry_after)
        return response
    messages.success(
        request,
        _("We sent a link to %(address)s. Open it to make it your e-mail address.")
        % {"address": address},
    )
    return redirect("accounts:preferences")


@never_cache
@require_http_methods(["GET", "POST"])
def confirm_address(request: HttpRequest, token: str) -> HttpResponse:
    """The mailed link: a GET shows the address with "Confirm address" (mail scanners open
    links); a POST sets it, once."""
    try:
        if request.method == "POST":
            address = addresses.confirm_change(user=request.user, token=token)
            messages.success(
                request, _("Your e-mail address is now %(address)s.") % {"address": address}
            )
            return redirect("accounts:preferences")
        change = addresses.read_link(user=request.user, token=token)
    except (addresses.LinkRefused, addresses.LinkGone) as refused:
        context = {"status": refused.status, "message": refused.message}
        return render(request, "error.html", context, status=refused.status)
    return render(request, "reach/confirm_address.html", {"address": change.address})
