import json

from django import template
from django.utils.translation import gettext

from chat.markdown import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    """Assistant markdown as sanitised HTML."""
    return render_markdown(text)


@register.filter
def translate_stored(msgid: str) -> str:
    """Translate a message stored as its English msgid (see chat.services)."""
    return gettext(msgid)


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


@register.filter
def is_question_tool(name: str) -> bool:
    from questions.schemas import QUESTION_TOOL_NAMES

    return name in QUESTION_TOOL_NAMES
