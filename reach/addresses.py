"""A user's own e-mail address, set from Settings and proven by a link mailed to it, so
questions can reach them by mail without an administrator.

The link carries the user, the new address and the address it replaces, signed
(django.core.signing) and valid for EMAIL_CONFIRM_SECONDS. Confirming needs the same user's
session and sets the address only while the old one is still in place, so a link works once
and an older link stops working when another was confirmed. Nothing is stored until then.
"""

import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.errors import ParleyError, RateLimited
from core.limits import count_in_window

SALT = "parley.reach.email-address"
# How long a confirmation link works.
EMAIL_CONFIRM_SECONDS = 24 * 60 * 60
MAX_LENGTH = 254  # the User model's email field
# Confirmation mails a user may ask for in an hour: Parley never mails a stranger's address
# over and over for them.
MAILS_PER_HOUR = 5
HOUR = 60 * 60

NOT_AN_ADDRESS = gettext_lazy("Enter an e-mail address, such as ada@example.org.")
SAME_ADDRESS = gettext_lazy("That is your e-mail address already.")
TOO_MANY = gettext_lazy(
    "You asked for several confirmation e-mails already: try again in %(minutes)s minutes."
)
NOT_SENT = gettext_lazy("The confirmation e-mail could not be sent. Try again later.")
BAD_LINK = gettext_lazy("This link is not valid: copy the whole link from the e-mail.")
EXPIRED_LINK = gettext_lazy("This link has expired. Ask for a new one in Settings.")
OTHER_ACCOUNT = gettext_lazy(
    "This link is for another account. Log in as the account that asked for it."
)
USED_LINK = gettext_lazy("This link has already been used, or another address was confirmed since.")


class AddressRefused(ParleyError):
    status = 400


class LinkRefused(ParleyError):
    status = 400


class LinkGone(ParleyError):
    status = 410


@dataclass(frozen=True)
class Change:
    """What a confirmation link asks: `user_id`'s address `was` becomes `address`."""

    user_id: int
    address: str
    was: str


def request_change(*, user, address: str) -> str:
    """Mail a confirmation link for `address` to `address` itself, under PUBLIC_URL like every
    link Parley mails. Returns the address as it will be stored. Raises AddressRefused, or
    RateLimited past MAILS_PER_HOUR."""
    address = address.strip(" \t")
    if not mailable(address):
        raise AddressRefused(NOT_AN_ADDRESS)
    if address.casefold() == (user.email or "").casefold():
        raise AddressRefused(SAME_ADDRESS)
    if (wait := count_in_window("address-mails", user.pk, MAILS_PER_HOUR, HOUR)) is not None:
        raise RateLimited(wait, TOO_MANY % {"minutes": -(-wait // 60)})
    token = signing.dumps({"user": user.pk, "address": address, "was": user.email}, salt=SALT)
    context = {
        "user": user,
        "address": address,
        "url": settings.PUBLIC_URL + reverse("reach:confirm_address", args=[token]),
        "hours": EMAIL_CONFIRM_SECONDS // 3600,
        "language": translation.get_language(),
    }
    message = EmailMultiAlternatives(
        subject=_("Confirm your e-mail address for Parley"),
        body=render_to_string("reach/address_email.txt", context),
        to=[address],
        headers={"Auto-Submitted": "auto-generated"},
    )
    html = render_to_string("reach/address_email.html", context)
    message.attach_alternative(html, "text/html")
    try:
        message.send()
    except OSError:  # smtplib.SMTPException is one: refused, unreachable, timed out
        raise AddressRefused(NOT_SENT) from None
    return address


def mailable(address: str) -> bool:
    """Whether `address` is one address a mail can be sent to as typed: at most MAX_LENGTH
    characters, valid for Django's validator, free of invisible and line-breaking characters
    (controls such as NUL, CR, LF and U+0085, format characters, U+2028 and U+2029, which
    could hide part of it or break the mail's headers), its domain encodable as IDNA as the
    mail's headers carry it."""
    if len(address) > MAX_LENGTH or any(_hidden(char) for char in address):
        return False
    try:
        validate_email(address)
        address.rpartition("@")[2].encode("idna")
    except (ValidationError, UnicodeError):
        return False
    return True


def _hidden(char: str) -> bool:
    # Control, format, private-use, surrogate, unassigned (C*) and separator (Z*) characters;
    # the ordinary space is refused by the validator.
    return char != " " and unicodedata.category(char)[0] in "CZ"


def read_link(*, user, token: str) -> Change:
    """What the link asks, if `user` may confirm it now. Raises LinkRefused (tampered, another
    account's) or LinkGone (expired, used)."""
    try:
        data = signing.loads(token, salt=SALT, max_age=EMAIL_CONFIRM_SECONDS)
    except signing.SignatureExpired:
        raise LinkGone(EXPIRED_LINK) from None
    except signing.BadSignature:
        raise LinkRefused(BAD_LINK) from None
    change = Change(user_id=data["user"], address=data["address"], was=data["was"] or "")
    if change.user_id != user.pk:
        raise LinkRefused(OTHER_ACCOUNT)
    if (user.email or "") != change.was:
        raise LinkGone(USED_LINK)
    return change


@transaction.atomic
def confirm_change(*, user, token: str) -> str:
    """Set the address the link names, once. Returns it. Raises LinkRefused or LinkGone."""
    change = read_link(user=user, token=token)
    # Set only while the address it replaces is still in place: a second use, or a use racing
    # another link's, changes nothing.
    changed = (
        get_user_model().objects.filter(pk=user.pk, email=change.was).update(email=change.address)
    )
    if not changed:
        raise LinkGone(USED_LINK)
    user.email = change.address
    return change.address
