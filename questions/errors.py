from django.utils.translation import gettext_lazy as _

from core.errors import ParleyError


class QuestionAlreadyResolved(ParleyError):
    """Second answers, double clicks, stale or unknown tool-call ids, lost races."""

    status = 409
    default_message = _("This question was already answered.")


class InvalidAnswer(ParleyError):
    status = 422
    default_message = _("That answer does not fit the question.")


class DraftTooLong(ParleyError):
    status = 413
    default_message = _("This draft is too long to be saved. Shorten it, or send it as it is.")


class NestedTooDeeply(ParleyError):
    """JSON a person sent nests arrays and objects deeper than Parley reads."""

    status = 400
