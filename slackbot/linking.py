"""Linking a Parley user to their Slack account: asked for in Settings with the Slack member
ID, confirmed in Slack by that member's click on the button the bot sends them (a signed
interaction names who clicked: nobody else's click confirms it). Nothing is matched by name.
Unlinking is one click in Settings."""

import json
import re
import secrets
import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core import jobs
from core.errors import ParleyError, RateLimited
from core.limits import count_in_window
from slackbot import client
from slackbot.models import SlackLink
from webhooks.models import Delivery, DeliveryChannel

# How long the bot's "Confirm" button links the account.
CONFIRM_WITHIN = timedelta(minutes=30)
# The event type of the outbox row that sends the confirmation.
LINK_EVENT = "slack.link"
MEMBER_ID = re.compile(r"[UW][A-Z0-9]{2,31}")
# Link requests a user may make in an hour (each sends a Slack member a message).
REQUESTS_PER_HOUR = 5
HOUR = 60 * 60


class LinkRefused(ParleyError):
    status = 422
    default_message = _("That is not a Slack member ID: it looks like U012AB3CDE.")


NOT_CONFIGURED = _("Slack is not set up on this Parley server.")
NO_SUCH_MEMBER = _("Slack knows no person with that member ID in this workspace.")
NOT_REACHED = _("Slack could not be asked about that member ID. Try again later.")
TAKEN = _("That Slack account is already linked to another Parley user.")
CONFIRM_EXPIRED = _(
    "This link request has expired or was replaced. Ask again in Parley's Settings."
)
CONFIRMED = _("Linked: this Slack account answers as %(name)s in Parley.")
TOO_MANY = _(
    "You asked to link a Slack account several times already: try again in %(minutes)s minutes."
)


def request_link(*, user, slack_user_id: str) -> SlackLink:
    """Ask to link `user` to the Slack member `slack_user_id`, a person of the workspace
    (users.info says so): the bot sends that member a Confirm button (through the outbox).
    Replaces the user's link, confirmed or not. Raises LinkRefused, or RateLimited past
    REQUESTS_PER_HOUR."""
    member = slack_user_id.strip().upper()
    if not client.configured():
        raise LinkRefused(NOT_CONFIGURED)
    if not MEMBER_ID.fullmatch(member):
        raise LinkRefused
    check_member(member)
    return _save_request(user=user, member=member)


def check_member(member: str) -> None:
    """Raise LinkRefused unless Slack knows `member` as a person (not a bot, not deleted)."""
    try:
        found = client.call("users.info", user=member).get("user") or {}
    except client.SlackFailed as failed:
        if failed.error == "user_not_found":
            raise LinkRefused(NO_SUCH_MEMBER) from None
        raise LinkRefused(NOT_REACHED) from None
    except Exception:  # an outage or a 429: nothing is asked of that member now
        raise LinkRefused(NOT_REACHED) from None
    if found.get("deleted") or found.get("is_bot"):
        raise LinkRefused(NO_SUCH_MEMBER)


@transaction.atomic
def _save_request(*, user, member: str) -> SlackLink:
    if (
        SlackLink.objects.filter(slack_user_id=member, confirmed_at__isnull=False)
        .exclude(user=user)
        .exists()
    ):
        raise LinkRefused(TAKEN)
    if (wait := count_in_window("slack-links", user.pk, REQUESTS_PER_HOUR, HOUR)) is not None:
        raise RateLimited(wait, TOO_MANY % {"minutes": -(-wait // 60)})
    link, _created = SlackLink.objects.update_or_create(
        user=user,
        defaults={
            "slack_user_id": member,
            "team_id": "",
            "nonce": secrets.token_urlsafe(24),
            "requested_at": timezone.now(),
            "confirmed_at": None,
        },
    )
    Delivery.objects.create(
        channel=DeliveryChannel.SLACK,
        recipient=user,
        target=member,
        event_id=f"slack_{uuid.uuid4().hex}",
        event_type=LINK_EVENT,
        body=json.dumps({"link": link.pk, "nonce": link.nonce}),
    )
    jobs.run_soon_on_commit()
    return link


@transaction.atomic
def confirm_link(*, nonce: str, slack_user_id: str, team_id: str) -> SlackLink:
    """The Slack member `slack_user_id` clicked the Confirm button carrying `nonce`: the link
    is confirmed if it was asked for that member, recently. Raises LinkRefused."""
    link = (
        SlackLink.objects.select_for_update()
        .select_related("user")
        .filter(nonce=nonce, slack_user_id=slack_user_id, confirmed_at__isnull=True)
        .first()
    )
    if link is None or link.requested_at < timezone.now() - CONFIRM_WITHIN:
        raise LinkRefused(CONFIRM_EXPIRED)
    link.confirmed_at = timezone.now()
    link.team_id = team_id
    try:
        with transaction.atomic():
            link.save(update_fields=["confirmed_at", "team_id"])
    except IntegrityError:
        raise LinkRefused(TAKEN) from None
    return link


def unlink(*, user) -> None:
    """Forget the user's Slack account: it answers and receives nothing more."""
    SlackLink.objects.filter(user=user).delete()


def linked_user(*, slack_user_id: str, team_id: str):
    """The active Parley user whose confirmed link is this Slack member, or None."""
    link = (
        SlackLink.objects.select_related("user")
        .filter(slack_user_id=slack_user_id, confirmed_at__isnull=False, user__is_active=True)
        .first()
    )
    if link is None or (link.team_id and team_id and link.team_id != team_id):
        return None
    return link.user
