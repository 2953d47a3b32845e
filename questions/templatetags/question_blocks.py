from django import template
from django.utils.translation import gettext_lazy as _

from questions.blocks import QuestionPayload, payload_of

register = template.Library()


@register.filter
def question_payload(block) -> QuestionPayload | None:
    """The typed payload of a question block (None if it cannot be read)."""
    return payload_of(block)


# How a question was resolved (answeredVia), as the audit line names it.
VIA_LABELS = {
    "browser": _("browser"),
    "api": _("API"),
    "terminal": _("terminal"),
    "auto-resolve": _("a message"),
}


@register.filter
def via_label(via: str | None) -> str:
    return VIA_LABELS.get(via or "", via or "")
