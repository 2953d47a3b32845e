"""The README's production set passes `manage.py check --deploy` and serves https only (but
/healthz); the development defaults (`make run`) still serve plain http. Settings are read
from the environment at import, so each configuration runs in a process of its own."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def production_set() -> dict[str, str]:
    """The variables of the README's production set, with a real secret key."""
    readme = (ROOT / "README.md").read_text()
    assert MARKER in readme, "the README lost its production set"
    block = re.search(r"```sh\n(.*?)```", readme[readme.index(MARKER) :], re.DOTALL)
    variables = {}
    for line in block.group(1).splitlines():
        assignment = line.split("#", 1)[0].strip()
        if assignment:
            name, value = assignment.split("=", 1)
            variables[name] = value
    variables["SECRET_KEY"] = secrets.token_urlsafe(50)
    return variables


def run(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run Python in the project with only `env` (and a database of the test's own)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def probe(env: dict[str, str], host: str, tmp_path: Path) -> dict:
    result = run(["-c", f"HOST = {host!r}\n{PROBE}"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_the_production_set_passes_the_deployment_checks(tmp_path):
    env = production_set()
    assert env["DEBUG"] == "false"

    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env, tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_development_defaults_fail_the_deployment_checks(tmp_path):
    """The check above can fail: without the production set it reports the https settings."""
    env = {"DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50)}

    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env, tmp_path)

    assert result.returncode != 0
    for check in ["W004", "W008", "W012", "W016"]:
        assert f"security.{check}" in result.stderr


def test_the_production_set_serves_https_only_but_healthz(tmp_path):
    env = production_set()
    del env["STATIC_ROOT"]  # nothing collected there (tests/test_static_files.py collects)
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
