"""Template helpers for the operators' transcript in the admin (templates/admin/chat)."""

from django import template
from django.template import TemplateDoesNotExist
from django.template.loader import select_template

from chat.engine import tools

register = template.Library()


@register.filter
def admin_action_template(action_type: str) -> str:
    """The admin's template for an action block of this type: the registering app's template
    under admin/ (e.g. admin/questions/question.html), or "" when it has none."""
    name = tools.template_for_action(action_type)
    if not name:
        return ""
    try:
        return select_template([f"admin/{name}"]).origin.template_name
    except TemplateDoesNotExist:
        return ""
