"""A conversation connected to a Slack channel by its owner (Settings, Slack): its questions
are posted to the channel, where its owner and participants who linked their Slack account
answer them, instead of to each person's direct messages. The bot must be in the channel
(conversations.info says so when it is connected)."""

import re

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from chat.models import Conversation
from chat.selectors import Need, conversation_for_user
from slackbot import client
from slackbot.linking import NOT_CONFIGURED, LinkRefused
from slackbot.models import SlackChannel

CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,31}")

NOT_A_CHANNEL = _("That is not a Slack channel ID: it looks like C012AB3CDE.")
NOT_IN_CHANNEL = _(
    "The Parley app is not in that channel: invite it there first (/invite @Parley)."
)
NOT_REACHED = _("Slack could not be asked about that channel. Try again later.")


def connect_conversation(*, user, conversation_id: int, channel_id: str) -> SlackChannel:
    """Connect the user's own conversation to a Slack channel the bot is in (replacing the
    channel it had). Raises LinkRefused, ConversationNotFound, NotAllowed (not the owner)."""
    channel_id = channel_id.strip().upper()
    if not client.configured():
        raise LinkRefused(NOT_CONFIGURED)
    if not CHANNEL_ID.fullmatch(channel_id):
        raise LinkRefused(NOT_A_CHANNEL)
    conversation_for_user(user=user, conversation_id=conversation_id, need=Need.MANAGE)
    try:
        found = client.call("conversations.info", channel=channel_id)
    except Exception:  # Slack's refusal (channel_not_found) or outage: said, nothing saved
        raise LinkRefused(NOT_REACHED) from None
    if not found.get("channel", {}).get("is_member"):
        raise LinkRefused(NOT_IN_CHANNEL)
    with transaction.atomic():
        conversation_for_user(user=user, conversation_id=conversation_id, need=Need.MANAGE)
        connected, _created = SlackChannel.objects.update_or_create(
            conversation_id=conversation_id,
            defaults={"channel_id": channel_id, "connected_by": user},
        )
    return connected


def disconnect_conversation(*, user, conversation_id: int) -> None:
    """Its questions go to people's direct messages again."""
    conversation_for_user(user=user, conversation_id=conversation_id, need=Need.MANAGE)
    SlackChannel.objects.filter(conversation_id=conversation_id).delete()


def owned_conversations(*, user, limit: int = 50) -> list[Conversation]:
    """The user's own conversations, newest first, for the choice of one to connect."""
    return list(
        Conversation.objects.filter(
            owner=user, deleted_at__isnull=True, parent__isnull=True
        ).order_by("-updated_at", "-id")[:limit]
    )


def connected_channels(*, user) -> list[SlackChannel]:
    return list(
        SlackChannel.objects.filter(conversation__owner=user, conversation__deleted_at__isnull=True)
        .select_related("conversation")
        .order_by("conversation__title", "pk")
    )
