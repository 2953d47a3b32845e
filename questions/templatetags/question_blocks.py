from django import template

from questions.blocks import QuestionPayload, payload_of

register = template.Library()


@register.filter
def question_payload(block) -> QuestionPayload | None:
    """The typed payload of a question block (None if it cannot be read)."""
    return payload_of(block)
