"""The Settings page renders the sections and links the apps above accounts add to it
(accounts.settings_page), in their order, without knowing those apps."""

import re
from contextlib import ExitStack

import pytest
from django.test import RequestFactory
from django.urls import reverse

from accounts import settings_page
from accounts.settings_page import Link, Section, Slot
from core.registry import Registry

pytestmark = pytest.mark.django_db

SETTINGS = reverse("accounts:preferences")
SECTION = """<section class="settings-section" aria-labelledby="{{ heading_id }}">
  <h2 id="{{ heading_id }}">{{ heading }}</h2><p>{{ said }}</p>
</section>"""
ROW = """<p class="settings-help" id="test-row">{{ said }}</p>"""


def headings(html: str) -> list[str]:
    return re.findall(r"<h2 [^>]*>([^<]+)</h2>", html)


def preferences_form(html: str) -> str:
    start = html.index('id="settings-form"')
    return html[start : html.index("</form>", start)]


@pytest.fixture
def templates(settings, tmp_path):
    """A folder of templates for the sections a test adds."""
    (tmp_path / "test_settings").mkdir()
    (tmp_path / "test_settings" / "section.html").write_text(SECTION)
    (tmp_path / "test_settings" / "row.html").write_text(ROW)
    [engine] = settings.TEMPLATES
    settings.TEMPLATES = [{**engine, "DIRS": [*engine["DIRS"], tmp_path]}]


@pytest.fixture
def added(templates):
    """Adds sections and links as an app's ready() would, until the test ends."""
    with ExitStack() as stack:

        def add(*entries: Section | Link) -> None:
            for entry in entries:
                registry = (
                    settings_page.links if isinstance(entry, Link) else settings_page.sections
                )
                stack.enter_context(registry.added(entry, key=entry.name))

        yield add


def section(name: str, order: int, heading: str, said: str = "", **kwargs) -> Section:
    context = {"heading": heading, "heading_id": f"{name}-heading", "said": said}
    return Section(
        name=name,
        template="test_settings/section.html",
        order=order,
        context=lambda request: context,
        **kwargs,
    )


def test_the_page_shows_every_apps_section_in_order(client, user):
    client.force_login(user)
    html = client.get(SETTINGS).content.decode()
    assert headings(html) == [
        "Appearance",
        "Language",
        "Notifications",
        "Questions",
        "E-mail address",
        "Sessions and tokens",
        "Connect an agent",
        "More settings",
    ]
    more = html[html.index('id="more-heading"') :]
    assert re.findall(r'<a href="([^"]+)">([^<]+)</a>', more) == [
        ("/settings/tokens/", "API tokens"),
        ("/settings/apps/", "Connected apps"),
        ("/settings/webhooks/", "Webhooks"),
        ("/settings/tools/", "Tools"),
    ]
    # reach's switch is a row of the Notifications section, inside the preferences form.
    form = preferences_form(html)
    notifications = form[form.index('id="notifications-heading"') : form.index("questions-heading")]
    assert 'id="push-switch" role="switch"' in notifications


def test_a_section_an_app_adds_appears_in_its_order_with_its_context(client, user, added):
    added(section("test.late", 250, "Late one", said="From its context"))
    added(section("test.early", 50, "Early one"))
    client.force_login(user)
    html = client.get(SETTINGS).content.decode()
    assert headings(html)[3:] == [
        "Questions",
        "Early one",
        "E-mail address",
        "Sessions and tokens",
        "Late one",
        "Connect an agent",
        "More settings",
    ]
    assert "<p>From its context</p>" in html


def test_a_row_added_to_notifications_is_inside_the_form_in_its_order(client, user, added):
    added(
        Section(
            name="test.row",
            template="test_settings/row.html",
            order=50,
            slot=Slot.NOTIFICATIONS,
            context=lambda request: {"said": f"Row for {request.user.username}"},
        )
    )
    client.force_login(user)
    html = client.get(SETTINGS).content.decode()
    form = preferences_form(html)
    row = form.index('<p class="settings-help" id="test-row">Row for ada</p>')
    assert form.index('id="notifications-heading"') < row < form.index('id="push-setting"')
    assert "Row for ada" not in html.replace(form, "")


def test_a_link_an_app_adds_appears_in_more_settings_in_its_order(client, user, added):
    added(
        Link(
            name="test.link",
            label="Somewhere else",
            description="Another page.",
            url_name="accounts:preferences",
            order=150,
        )
    )
    client.force_login(user)
    html = client.get(SETTINGS).content.decode()
    more = html[html.index('id="more-heading"') :]
    assert re.findall(r"<a [^>]*>([^<]+)</a><span>", more) == [
        "API tokens",
        "Connected apps",
        "Somewhere else",
        "Webhooks",
        "Tools",
    ]
    assert '<a href="/settings/">Somewhere else</a><span>Another page.</span>' in more


def test_adding_a_name_again_replaces_it(client, user, added):
    added(section("test.twice", 250, "First"))
    settings_page.add_section(section("test.twice", 50, "Second"))  # a second ready()
    client.force_login(user)
    found = headings(client.get(SETTINGS).content.decode())
    assert "First" not in found
    assert found.count("Second") == 1 and found.index("Second") < found.index("E-mail address")


def test_with_nothing_added_the_page_is_the_preferences_form_alone(client, user, monkeypatch):
    monkeypatch.setattr(settings_page, "sections", Registry("no sections"))
    monkeypatch.setattr(settings_page, "links", Registry("no links"))
    client.force_login(user)
    html = client.get(SETTINGS).content.decode()
    assert headings(html) == ["Appearance", "Language", "Notifications", "Questions"]
    assert "push-switch" not in html


def test_a_refused_post_shows_what_was_typed_over_the_sections_context(user, added):
    added(section("test.refused", 250, "Refusable", said="Its default"))
    request = RequestFactory().post(SETTINGS)
    request.user = user
    response = settings_page.render(request, status=400, shown={"said": "What was typed"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "<p>What was typed</p>" in html and "Its default" not in html
