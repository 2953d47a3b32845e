"""Assistant markdown to safe HTML: markdown-it-py renders, nh3 sanitises."""

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_renderer = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_renderer.enable(["table", "strikethrough"])

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}}


def render_markdown(text: str) -> SafeString:
    html = _renderer.render(text)
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
