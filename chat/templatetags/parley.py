import json
import re
from dataclasses import dataclass

from django import template
from django.conf import settings
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from chat import selectors
from chat.blocks import ToolResultBlock, parse_blocks
from chat.engine import providers, tools
from chat.engine.subagents import TOOL_NAME as SPAWN_AGENTS
from chat.markdown import render_markdown
from chat.models import AgentState, Conversation, Message
from core.text import drop_invisible

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    """Assistant markdown as sanitised HTML."""
    return render_markdown(text)


@register.filter
def translate_stored(msgid: str) -> str:
    """Translate a message stored as its English msgid (see chat.engine.turns)."""
    return gettext(msgid)


@register.filter
def pretty_json(value) -> str:
    """JSON a model or a tool wrote (tool arguments, stored blocks), laid out to read, without
    the invisible characters that could make it read as something else."""
    return drop_invisible(
        json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    )


@register.filter
def is_pausing_tool(name: str) -> bool:
    """A pausing tool's call is shown by its action block, not as a tool call."""
    tool = tools.registered(name)
    return tool is not None and tool.pauses


@register.filter
def action_template(action_type: str) -> str:
    """The template that renders an action block of this type ("" if none is registered)."""
    return tools.template_for_action(action_type) or ""


@register.filter
def is_spawn_call(name: str) -> bool:
    """A spawn_agents call is shown as its sub-agents (chat.engine.subagents)."""
    return name == SPAWN_AGENTS


@register.simple_tag
def subagents_of(conversation, call_id: str) -> list[selectors.Subagent]:
    """The sub-agents one call of `conversation` started (the page has checked access)."""
    return selectors.subagents_of(conversation, call_id)


@register.simple_tag
def tool_result(message: Message, call_id: str) -> ToolResultBlock | None:
    """The result of a tool call made in `message` (None while the tool runs)."""
    return selectors.tool_result(message=message, call_id=call_id)


@register.simple_tag
def last_turn(conversation: Conversation) -> selectors.LastTurn | None:
    """The turn Regenerate and Edit act on; None while a turn runs or waits for the user."""
    if conversation.pk is None:  # a new conversation's blank page
        return None
    if conversation.agent_state not in (AgentState.IDLE, AgentState.ERROR):
        return None
    return selectors.last_turn(conversation_id=conversation.pk)


@register.simple_tag
def agent_suggestions() -> list[str]:
    """What to try first with the configured agent (the scripted agent's own list)."""
    return providers.suggestions()


@register.simple_tag
def max_message_chars() -> int:
    """The longest message a person may send (PARLEY_MAX_MESSAGE_CHARS): the composer says
    how near it is before anything is sent."""
    return settings.PARLEY_MAX_MESSAGE_CHARS


@register.filter
def highlight(text, query: str) -> SafeString:
    """`text`, escaped, with each word of the search `query` in it marked (<mark>), whatever
    its case: a search result shows why it was found."""
    text = str(text)
    words = selectors.search_words(query or "")
    if not words:
        return escape(text)
    found = re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))), re.I)
    parts, end = [], 0
    for match in found.finditer(text):
        parts += [escape(text[end : match.start()]), format_html("<mark>{}</mark>", match[0])]
        end = match.end()
    return mark_safe("".join([*parts, escape(text[end:])]))  # noqa: S308 - each part escaped


@dataclass(frozen=True)
class ToolCard:
    """How a tool call's card names the tool and what it says of the call besides its
    result: "waiting" (for an approval), "denied", or "" (its result says)."""

    title: str
    source: str
    state: str


@register.simple_tag
def tool_card(message: Message, name: str, call_id: str) -> ToolCard:
    """The card of the call `call_id` (of tool `name`) in `message`: the tool's title and
    source as it is registered, else as the block deciding the call knows them, else its
    name."""
    decided = tools.call_state(parse_blocks(message.blocks), call_id)
    tool = tools.registered(name)
    title = (tool.title if tool else "") or (decided.title if decided else "") or name
    source = (tool.source if tool else "") or (decided.source if decided else "")
    return ToolCard(title=title, source=source, state=decided.state if decided else "")
