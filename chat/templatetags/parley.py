import json

from django import template
from django.utils.translation import gettext

from chat import pausing, subagents
from chat.markdown import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    """Assistant markdown as sanitised HTML."""
    return render_markdown(text)


@register.filter
def translate_stored(msgid: str) -> str:
    """Translate a message stored as its English msgid (see chat.turns)."""
    return gettext(msgid)


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


@register.filter
def is_pausing_tool(name: str) -> bool:
    """A pausing tool's call is shown by its action block, not as a tool call."""
    return pausing.handler_for(name) is not None


@register.filter
def action_template(action_type: str) -> str:
    """The template that renders an action block of this type ("" if none is registered)."""
    return pausing.template_for_action(action_type) or ""


@register.filter
def is_spawn_call(name: str) -> bool:
    """A spawn_agents call is shown as its sub-agents (chat.subagents)."""
    return subagents.handles(name)


@register.simple_tag
def subagents_of(conversation, call_id: str) -> list[subagents.Subagent]:
    """The sub-agents one call of `conversation` started (the page has checked access)."""
    return subagents.subagents_of(conversation, call_id)
