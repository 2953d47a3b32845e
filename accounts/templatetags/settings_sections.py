"""`{% settings_section section %}`: a section another app added to the Settings page
(accounts.settings_page.Section), rendered with the page's context, what the section's own
`context(request)` gives, and the page's `shown` over both."""

from django import template
from django.template.loader import get_template
from django.utils.safestring import SafeString

from accounts.settings_page import Section

register = template.Library()


@register.simple_tag(takes_context=True)
def settings_section(context: template.Context, section: Section) -> SafeString:
    values = {
        **context.flatten(),
        **section.context(context["request"]),
        **(context.get("shown") or {}),
    }
    return get_template(section.template).render(values)
