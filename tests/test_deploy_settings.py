"""The production set of the operators' docs (docs/operators/production.md) passes
`manage.py check --deploy`, serves https only (but /healthz) and collected static files with
hashed names, gzip and a far-future max-age; the development defaults (`make run`) still
serve plain http from the finders. A production process refuses to start with a placeholder
or weak SECRET_KEY. Settings are read from the environment at import, so each
configuration runs in a process of its own."""

import json
import re
import runpy
import secrets
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import secret_key
from tests.live_server import ROOT, SERVE, run_isolated

PRODUCTION_DOC = ROOT / "docs/operators/production.md"
MARKER = "<!-- production-set:"

# What a browser, and a load balancer, see; printed as JSON.
PROBE = """
import json
import django
from django.test import Client

django.setup()
client = Client(headers={"host": HOST})
seen = {}
for name, headers in [("http", {}), ("https", {"x-forwarded-proto": "https"})]:
    login = client.get("/login/", headers=headers)
    seen[name] = {
        "login": login.status_code,
        "location": login.get("Location"),
        "hsts": login.get("Strict-Transport-Security"),
        "csrf_cookie_secure": bool(login.cookies["csrftoken"]["secure"])
        if "csrftoken" in login.cookies else None,
        "healthz": client.get("/healthz", headers=headers).status_code,
    }
print(json.dumps(seen))
"""

# The page's static URLs, and how one of them is served to a browser that accepts gzip.
STATIC_PROBE = """
import gzip
import json
import re
import django
from django.test import Client

django.setup()
client = Client(headers={"host": "127.0.0.1"})
page = client.get("/login/").content.decode()
urls = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
script = next(url for url in urls if "htmx.min" in url)
response = client.get(script, headers={"accept-encoding": "gzip"})
body = b"".join(response.streaming_content)
print(json.dumps({
    "urls": urls,
    "status": response.status_code,
    "encoding": response.get("Content-Encoding"),
    "cache_control": response.get("Cache-Control"),
    "text": gzip.decompress(body).decode() if response.get("Content-Encoding") else "",
}))
"""


def production_set() -> dict[str, str]:
    """The variables of the documented production set, with a real secret key."""
    doc = PRODUCTION_DOC.read_text()
    assert MARKER in doc, f"{PRODUCTION_DOC.name} lost its production set"
    block = re.search(r"```sh\n(.*?)```", doc[doc.index(MARKER) :], re.DOTALL)
    variables = {}
    for line in block.group(1).splitlines():
        assignment = line.split("#", 1)[0].strip()
        if assignment:
            name, value = assignment.split("=", 1)
            variables[name] = value
    variables["SECRET_KEY"] = secrets.token_urlsafe(50)
    return variables


def probe(env: dict[str, str], host: str, tmp_path: Path) -> dict:
    return run_script(f"HOST = {host!r}\n{PROBE}", env, tmp_path)


def run_script(script: str, env: dict[str, str], tmp_path: Path) -> dict:
    result = run_isolated(["-c", script], tmp_path, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_the_production_set_passes_the_deployment_checks(tmp_path):
    env = production_set()
    assert env["DEBUG"] == "false"

    result = run_isolated(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], tmp_path, **env
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_development_defaults_fail_the_deployment_checks(tmp_path):
    """The check above can fail: without the production set it reports the https settings."""
    env = {"DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50)}

    result = run_isolated(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], tmp_path, **env
    )

    assert result.returncode != 0
    for check in ["W004", "W008", "W012", "W016"]:
        assert f"security.{check}" in result.stderr


def test_the_production_set_serves_https_only_but_healthz(tmp_path):
    env = production_set()
    del env["STATIC_ROOT"]  # nothing collected there (the static files test collects)
    seen = probe(env, "chat.example.com", tmp_path)

    assert seen["http"]["login"] == 301
    assert seen["http"]["location"] == "https://chat.example.com/login/"
    assert seen["http"]["healthz"] == 200  # load balancers probe over plain http
    assert seen["https"]["login"] == 200  # the proxy's X-Forwarded-Proto is trusted
    hsts = f"max-age={env['SECURE_HSTS_SECONDS']}; includeSubDomains; preload"
    assert seen["https"]["hsts"] == hsts
    assert seen["https"]["csrf_cookie_secure"] is True
    assert seen["https"]["healthz"] == 200


def test_the_development_defaults_serve_plain_http(tmp_path):
    seen = probe({"DEBUG": "true"}, "127.0.0.1", tmp_path)  # what `make run` sets

    assert seen["http"]["login"] == 200
    assert seen["http"]["hsts"] is None
    assert seen["http"]["csrf_cookie_secure"] is False
    assert seen["http"]["healthz"] == 200
    # A client cannot claim https: no proxy is trusted by default.
    assert seen["https"]["hsts"] is None


def test_collected_static_files_have_hashed_names_gzip_and_a_far_future_max_age(tmp_path):
    env = {
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "STATIC_ROOT": str(tmp_path / "static"),
    }
    collected = run_isolated(
        ["manage.py", "collectstatic", "--no-input", "-v", "0"], tmp_path, **env
    )
    assert collected.returncode == 0, collected.stderr

    seen = run_script(STATIC_PROBE, env, tmp_path)

    assert "/static/parley.css" not in seen["urls"]
    assert any(re.fullmatch(r"/static/parley\.[0-9a-f]{12}\.css", url) for url in seen["urls"])
    assert seen["status"] == 200
    assert seen["encoding"] == "gzip"
    max_age = int(re.search(r"max-age=(\d+)", seen["cache_control"]).group(1))
    assert max_age >= 365 * 24 * 60 * 60
    assert "immutable" in seen["cache_control"]
    assert seen["text"] == (ROOT / "static/vendor/htmx/htmx.min.js").read_text()


def test_without_collectstatic_the_development_server_serves_from_the_finders(tmp_path):
    seen = run_script(STATIC_PROBE, {"DEBUG": "true"}, tmp_path)

    assert "/static/parley.css" in seen["urls"]
    assert seen["status"] == 200


# Keys a production process (DEBUG off) refuses to start with, and what it says of each.
WEAK_KEYS = {
    # The placeholders of docs/operators/production.md and deploy/parley.env.example.
    "change-me": "is a placeholder",
    "change-me-to-50-random-characters": "is a placeholder",
    # The docs' line copied whole, its comment included: long, and still the placeholder.
    "change-me   # 50+ random characters: python -c "
    '"import secrets; print(secrets.token_urlsafe(50))"': "is a placeholder",
    "parley-insecure-development-key-do-not-deploy": "is a placeholder",
    # Django's deployment check (security.W009) warns of these.
    "django-insecure-" + secrets.token_urlsafe(50): "is a placeholder",
    "parley-test-only": "has 16 characters",
    secrets.token_urlsafe(36): "has 48 characters",
    "ab" * 40: "has 2 different characters",
}


def settings_with(monkeypatch, **env: str) -> dict:
    """config/settings.py as a process with these variables (and the suite's others) makes
    them."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(ROOT / "config/settings.py"))


@pytest.mark.parametrize("key", WEAK_KEYS, ids=range(len(WEAK_KEYS)))
def test_a_placeholder_or_weak_secret_key_is_refused_when_debug_is_off(monkeypatch, key):
    with pytest.raises(ImproperlyConfigured) as refused:
        settings_with(monkeypatch, DEBUG="false", SECRET_KEY=key)
    said = str(refused.value)
    assert said.startswith(f"SECRET_KEY {WEAK_KEYS[key]}")
    assert "at least 50 random characters" in said
    assert "secrets.token_urlsafe(50)" in said
    # Only a placeholder is named: the key itself is never printed.
    assert key not in said or key in secret_key.PLACEHOLDERS


def test_a_long_random_key_is_accepted_and_development_needs_none(monkeypatch):
    key = secrets.token_urlsafe(50)
    assert settings_with(monkeypatch, DEBUG="false", SECRET_KEY=key)["SECRET_KEY"] == key
    # `make run` (DEBUG=true) starts with any key, or none.
    assert settings_with(monkeypatch, DEBUG="true", SECRET_KEY="change-me")["DEBUG"]
    monkeypatch.delenv("SECRET_KEY")
    assert settings_with(monkeypatch, DEBUG="true")["SECRET_KEY"]


def test_former_secret_keys_are_read_from_the_environment(monkeypatch):
    key = secrets.token_urlsafe(50)
    made = settings_with(monkeypatch, SECRET_KEY=key, SECRET_KEY_FALLBACKS="old-one, old-two")
    assert made["SECRET_KEY_FALLBACKS"] == ["old-one", "old-two"]
    monkeypatch.delenv("SECRET_KEY_FALLBACKS")
    assert settings_with(monkeypatch, SECRET_KEY=key)["SECRET_KEY_FALLBACKS"] == []


def test_a_production_process_with_a_placeholder_key_does_not_start(tmp_path):
    for command in (["manage.py", "check"], [*SERVE[1:], "-b", "127.0.0.1", "-p", "0"]):
        result = run_isolated(command, tmp_path, timeout=60, DEBUG="false", SECRET_KEY="change-me")
        assert result.returncode != 0
        assert "ImproperlyConfigured: SECRET_KEY is a placeholder" in result.stderr
