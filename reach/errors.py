from django.utils.translation import gettext_lazy as _

from core.errors import ParleyError


class BadLink(ParleyError):
    """A link whose signature does not verify: mistyped, cut short, or tampered with."""

    status = 400
    default_message = _(
        "This link is not valid: it may have been cut short or changed. Open the question in "
        "Parley instead."
    )


class UnknownLink(ParleyError):
    status = 404
    default_message = _("This link leads to no question. Open the question in Parley instead.")


class LinkUsed(ParleyError):
    status = 410
    default_message = _("This link has already been used.")


class QuestionClosed(ParleyError):
    """The question no longer waits: answered elsewhere, rejected, expired or cancelled."""

    status = 410
    default_message = _("This question no longer waits for an answer.")


class LinkRevoked(ParleyError):
    """The link's recipient may no longer answer in its conversation: removed from it, or
    now a viewer."""

    status = 410
    default_message = _("This question is no longer available to you.")


ANSWERED_ALREADY = _("This question was already answered.")
EXPIRED_ALREADY = _("This question expired before it was answered.")


class BadSubscription(ParleyError):
    status = 422
    default_message = _("This browser’s push subscription could not be saved.")
