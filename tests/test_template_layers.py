"""Templates point down, as imports do: a template of an app (templates/<app>/) links, loads
and includes nothing of an app above it. The order is the apps' layers contract in
pyproject.toml (`lint-imports` checks the imports by it), so an app added to a layer is checked
without changing this file.

What a template names is owned by the app whose code serves it: `{% url 'name' %}` by the
module of the view the name resolves to (`api_tokens` is config's URL but api's view),
`{% load lib %}` by the installed app with `templatetags/lib.py`, `{% include %}` and
`{% extends "app/..." %}` by the folder the template is in. Django's own (`i18n`, `admin:...`)
and project-wide templates (`base.html`) are below every app.
"""

import re
import tomllib
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest
from django.apps import apps
from django.urls import URLPattern, URLResolver, get_resolver

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
IMPORTLINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
APPS = set(IMPORTLINTER["root_packages"])

URL = re.compile(r"{%\s*url\s+(['\"])([\w:-]+)\1")
LOAD = re.compile(r"{%\s*load\s+([^%]+?)\s*%}")
TEMPLATE_NAME = re.compile(r"{%\s*(?:include|extends)\s+(['\"])([^'\"]+)\1")


def app_layers() -> list[tuple[set[str], bool]]:
    """The apps' layers contract, top first: each layer's apps, and whether they are
    independent (`a | b`: neither may use the other) or not (`a : b`)."""
    [contract] = [
        c
        for c in IMPORTLINTER["contracts"]
        if c["type"] == "layers" and "containers" not in c and "accounts" in str(c["layers"])
    ]
    layers = []
    for layer in contract["layers"]:
        independent = "|" in layer
        layers.append(({name.strip() for name in re.split(r"[|:]", layer)}, independent))
    return layers


def may_use(user: str, owner: str) -> bool:
    """Whether `user`'s templates may name what `owner` serves."""
    if owner == user or owner not in APPS:
        return True
    layers = app_layers()
    rank = {
        app: (index, independent)
        for index, (names, independent) in enumerate(layers)
        for app in names
    }
    (user_rank, independent), (owner_rank, _) = rank[user], rank[owner]
    return owner_rank > user_rank or (owner_rank == user_rank and not independent)


@cache
def url_owners() -> dict[str, str]:
    """Every URL name ("namespace:name" when namespaced), with the top package of its view's
    module."""
    owners: dict[str, str] = {}

    def walk(patterns, namespace: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = pattern.namespace
                walk(pattern.url_patterns, f"{namespace}{inner}:" if inner else namespace)
            elif isinstance(pattern, URLPattern) and pattern.name:
                owners.setdefault(namespace + pattern.name, pattern.callback.__module__)

    walk(get_resolver().url_patterns, "")
    return {name: module.split(".")[0] for name, module in owners.items()}


def library_owner(library: str) -> str:
    """The top package of the installed app whose `templatetags` defines `library`; "django"
    for Django's own libraries outside any app (`i18n`, `static`)."""
    for config in apps.get_app_configs():
        if find_spec(f"{config.name}.templatetags") and find_spec(
            f"{config.name}.templatetags.{library}"
        ):
            return config.name.split(".")[0]
    assert find_spec(f"django.templatetags.{library}"), f"{{% load {library} %}}: no such library"
    return "django"


def named(source: str) -> list[tuple[str, str]]:
    """What a template's source names, each with the app that owns it."""
    found = []
    for match in URL.finditer(source):
        name = match[2]
        assert name in url_owners(), f"{{% url '{name}' %}} resolves to no URL"
        found.append((f"{{% url '{name}' %}}", url_owners()[name]))
    for match in LOAD.finditer(source):
        words = match[1].split()
        libraries = words[words.index("from") + 1 :] if "from" in words else words
        found += [(f"{{% load {lib} %}}", library_owner(lib)) for lib in libraries]
    for match in TEMPLATE_NAME.finditer(source):
        found.append((f"{{% include/extends '{match[2]}' %}}", match[2].split("/")[0]))
    return found


def higher(app: str, source: str) -> list[str]:
    return [f"{what} ({owner})" for what, owner in named(source) if not may_use(app, owner)]


def app_templates() -> list[Path]:
    return sorted(
        path
        for app in APPS
        if (TEMPLATES / app).is_dir()
        for path in (TEMPLATES / app).rglob("*")
        if path.is_file()
    )


@pytest.mark.parametrize("path", app_templates(), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_a_template_names_nothing_of_an_app_above_its_own(path):
    app = path.relative_to(TEMPLATES).parts[0]
    assert higher(app, path.read_text(encoding="utf-8")) == []


def test_the_accounts_templates_are_checked():
    checked = {path.relative_to(TEMPLATES).parts[0] for path in app_templates()}
    assert "accounts" in checked and len(checked) > 5


def test_the_checker_catches_a_link_a_tag_library_and_a_template_of_a_higher_app():
    source = """{% load i18n static attention %}{% load question_blocks from question_blocks %}
      <a href="{% url 'reach:change_address' %}">{% url 'api_tokens' %}{% url 'webhooks:settings' %}
      {% url 'accounts:preferences' %}{% url 'admin:index' %}{% url 'set_language' %}
      {% include "mcp_server/connect.html#section" %}{% extends "base.html" %}"""
    assert higher("accounts", source) == [
        "{% url 'reach:change_address' %} (reach)",
        "{% url 'api_tokens' %} (api)",
        "{% url 'webhooks:settings' %} (webhooks)",
        "{% load attention %} (questions)",
        "{% load question_blocks %} (questions)",
        "{% include/extends 'mcp_server/connect.html#section' %} (mcp_server)",
    ]
    # Down is allowed; so is a neighbour of a `:` layer, and not of a `|` one.
    assert higher("reach", source) == [
        "{% include/extends 'mcp_server/connect.html#section' %} (mcp_server)"
    ]
    assert higher("api", "{% url 'webhooks:settings' %}") == [
        "{% url 'webhooks:settings' %} (webhooks)"
    ]
