"""Slack's Interactivity URL (POST /integrations/slack/interactions: signed by Slack, no
login, no CSRF token) and Settings' "Slack" section: link an account, unlink it."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts import settings_page
from chat.errors import ConversationNotFound, NotAllowed
from core.errors import RateLimited
from slackbot import client, connecting, interactions, linking
from slackbot.models import SlackLink
from slackbot.verify import is_from_slack


@csrf_exempt
@login_not_required
@require_POST
def interactions_endpoint(request: HttpRequest) -> HttpResponse:
    """Slack's interaction payloads (`payload=` JSON, form-encoded). An unsigned, badly
    signed, stale or replayed request gets 401 and does nothing."""
    if not is_from_slack(
        body=request.body,
        timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
        signature=request.headers.get("X-Slack-Signature", ""),
    ):
        return HttpResponse(status=401)
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except ValueError:
        return HttpResponse(status=400)
    if not isinstance(payload, dict):
        return HttpResponse(status=400)
    acknowledgement = interactions.handle(payload)
    if acknowledgement is None:
        return HttpResponse(status=200)
    return JsonResponse(acknowledgement)


def link_section(request: HttpRequest) -> dict:
    """What Settings' Slack section shows (slackbot/settings.html#link)."""
    configured = client.configured()
    return {
        "slack_configured": configured,
        "slack_link": SlackLink.objects.filter(user=request.user).first(),
        "slack_channels": connecting.connected_channels(user=request.user),
        "slack_conversations": (
            connecting.owned_conversations(user=request.user) if configured else []
        ),
    }


@require_POST
def link(request: HttpRequest) -> HttpResponse:
    """Ask to link the Slack member ID typed: the bot sends them a Confirm button."""
    typed = request.POST.get("slack_user_id", "")
    try:
        linking.request_link(user=request.user, slack_user_id=typed)
    except (linking.LinkRefused, RateLimited) as refused:
        shown = {"slack_user_id": typed, "slack_error": refused.message}
        response = settings_page.render(request, status=refused.status, shown=shown)
        if isinstance(refused, RateLimited):
            response["Retry-After"] = str(refused.retry_after)
        return response
    messages.success(
        request, _("The Parley app sent you a message in Slack: confirm the link there.")
    )
    return redirect("accounts:preferences")


@require_POST
def unlink(request: HttpRequest) -> HttpResponse:
    linking.unlink(user=request.user)
    messages.success(request, _("Your Slack account is no longer linked."))
    return redirect("accounts:preferences")


@require_POST
def connect(request: HttpRequest) -> HttpResponse:
    """Connect one of the user's conversations to a Slack channel the bot is in."""
    typed = request.POST.get("channel_id", "")
    try:
        conversation_id = int(request.POST.get("conversation", ""))
        connected = connecting.connect_conversation(
            user=request.user, conversation_id=conversation_id, channel_id=typed
        )
    except (ValueError, ConversationNotFound, NotAllowed, linking.LinkRefused) as refused:
        message = getattr(refused, "message", ConversationNotFound.default_message)
        shown = {"slack_channel_id": typed, "slack_channel_error": message}
        return settings_page.render(request, status=422, shown=shown)
    messages.success(
        request,
        _("Questions of “%(title)s” are now posted to the Slack channel %(channel)s.")
        % {"title": connected.conversation, "channel": connected.channel_id},
    )
    return redirect("accounts:preferences")


@require_POST
def disconnect(request: HttpRequest, conversation_id: int) -> HttpResponse:
    try:
        connecting.disconnect_conversation(user=request.user, conversation_id=conversation_id)
    except (ConversationNotFound, NotAllowed):
        return HttpResponse(status=404)
    messages.success(request, _("Questions of that conversation go to direct messages again."))
    return redirect("accounts:preferences")
