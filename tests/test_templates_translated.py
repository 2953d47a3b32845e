"""A template that gains a user-visible string not marked for translation fails this test."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
# Names that stay the same in every language.
UNTRANSLATED = {"Parley"}
VISIBLE_ATTRIBUTES = {"placeholder", "title", "aria-label", "alt", "hx-confirm", "label"}


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skipping += 1
        for name, value in attrs:
            if name in VISIBLE_ATTRIBUTES and value:
                self.found.append(value)

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skipping -= 1

    def handle_data(self, data):
        if not self.skipping:
            self.found.append(data)


def untranslated(source: str) -> list[str]:
    """User-visible text in a template that is not inside a translation tag."""
    # Django's {# #} comment ends on its own line; one that runs on is shown on the page.
    text = re.sub(r"{#.*?#}", " ", source)
    text = re.sub(r"{%\s*comment\b.*?{%\s*endcomment\s*%}", " ", text, flags=re.S)
    # CSS class names given through a block, such as {% block main_class %}.
    text = re.sub(r"{%\s*block\s+\w*class\s*%}.*?{%\s*endblock\s*%}", " ", text, flags=re.S)
    text = re.sub(r"{%\s*blocktranslate\b.*?{%\s*endblocktranslate\s*%}", " ", text, flags=re.S)
    text = re.sub(r"{%.*?%}", " ", text, flags=re.S)
    text = re.sub(r"{{.*?}}", " ", text, flags=re.S)
    parser = _Visible()
    parser.feed(text)
    problems = []
    for chunk in parser.found:
        words = [w for w in re.findall(r"[^\W\d_]{2,}", chunk) if w not in UNTRANSLATED]
        if words:
            problems.append(" ".join(chunk.split()))
    return problems


def test_the_checker_catches_what_it_should():
    assert untranslated("<p>Hello there</p>") == ["Hello there"]
    assert untranslated('<input placeholder="Type here">') == ["Type here"]
    assert untranslated("<p>{% translate 'Hello' %} {{ name }}</p><b>Parley</b>") == []
    assert untranslated("{% blocktranslate %}Hi {{ n }}{% endblocktranslate %}") == []
    assert untranslated("{# A note #}{% comment %}A longer\nnote{% endcomment %}") == []
    assert untranslated("{# A note that\nruns on #}") == ["{# A note that runs on #}"]


@pytest.mark.parametrize(
    "template",
    sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*.html")),
)
def test_every_visible_string_is_marked_for_translation(template):
    assert untranslated((TEMPLATES / template).read_text(encoding="utf-8")) == []
