"""The Settings page (`/settings/`) and its extension point: the apps above accounts add their
sections and links to it from their `AppConfig.ready()`, and the page renders what it is given
without knowing those apps (docs/developers/architecture.md, "The Settings page").

- `add_section(Section(...))`: a template rendered with the page's context and what the
  section's `context(request)` gives, in a `Slot` of the page, by `order`;
- `add_link(Link(...))`: an entry of "More settings", another page of settings;
- `render(request, ...)`: the page, for a view (any app's) that shows it again after a POST it
  refused, with the refusal in `shown`.

Both registries are keyed by the entry's name: adding a name again replaces its entry, so a
`ready()` that runs twice adds nothing twice.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render as render_template
from django.utils.functional import Promise

from accounts.forms import PreferencesForm
from accounts.selectors import preferences_for
from core.registry import Registry

PAGE = "accounts/preferences.html"
# The preferences form alone: what a save from the page (htmx) swaps in.
FORM = f"{PAGE}#preferences_form"


class Slot(StrEnum):
    # A section of its own, below the preferences form and above "More settings".
    PAGE = "page"
    # A row at the end of the form's "Notifications" section. It is inside the preferences
    # form, which saves none of its controls: give them no `name` (a switch driven by script).
    NOTIFICATIONS = "notifications"


def no_context(request: HttpRequest) -> Mapping[str, object]:
    return {}


@dataclass(frozen=True, kw_only=True)
class Section:
    # Unique across apps ("<app>.<what>"): the registry's key.
    name: str
    # A template name ("reach/settings.html#address"), rendered with the page's context (the
    # request, user, csrf_token, messages, and `shown`) and what `context` returns.
    template: str
    # Ascending within the slot; ties go by name.
    order: int
    slot: Slot = Slot.PAGE
    context: Callable[[HttpRequest], Mapping[str, object]] = no_context


@dataclass(frozen=True, kw_only=True)
class Link:
    """An entry of "More settings": another page of settings."""

    # Unique across apps: the registry's key.
    name: str
    label: str | Promise
    description: str | Promise
    # Reversed without arguments (`{% url %}`).
    url_name: str
    order: int


sections: Registry[Section] = Registry("Settings sections")
links: Registry[Link] = Registry("Settings links")


def add_section(section: Section) -> None:
    sections.add(section, key=section.name)


def add_link(link: Link) -> None:
    links.add(link, key=link.name)


def sections_in(slot: Slot) -> list[Section]:
    return sorted((s for s in sections if s.slot == slot), key=lambda s: (s.order, s.name))


def links_in_order() -> list[Link]:
    return sorted(links, key=lambda link: (link.order, link.name))


def render(
    request: HttpRequest,
    *,
    form: PreferencesForm | None = None,
    status: int = 200,
    shown: Mapping[str, object] | None = None,
    template: str = PAGE,
) -> HttpResponse:
    """The Settings page (or, with `template=FORM`, its preferences form). `form`: the
    preferences form as posted (its errors shown); `shown`: what a section shows again after
    its own form was refused (the value typed, the refusal), over what its `context` gives."""
    if form is None:
        form = PreferencesForm(instance=preferences_for(request.user))
    context = {
        "form": form,
        "notification_rows": sections_in(Slot.NOTIFICATIONS),
        "page_sections": sections_in(Slot.PAGE),
        "more_links": links_in_order(),
        "shown": dict(shown or {}),
    }
    return render_template(request, template, context, status=status)
