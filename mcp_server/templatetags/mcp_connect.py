"""`{% connect_an_agent %}`: the Settings page's "Connect an agent" section."""

from django import template

from mcp_server.connecting import connect_context

register = template.Library()


@register.inclusion_tag("mcp_server/connect.html#section", takes_context=True)
def connect_an_agent(context) -> dict:
    return {**connect_context(context["request"]), "csrf_token": context.get("csrf_token")}
