"""The commands the README and docs print, run as printed in a fresh clone (no SECRET_KEY, no
DEBUG in the environment): `make token`, `make user` and a missing production secret's error.
Real processes and a terminal (pexpect), each on a SQLite database of the test's own."""

import os
import re
import sqlite3
import subprocess

import pexpect
import pytest

from tests.live_server import ROOT, run_isolated

# Real processes (make, manage.py), as the other tests that start them.
pytestmark = pytest.mark.live


def fresh_environment(tmp_path) -> dict[str, str]:
    """A shell's environment as a newcomer has it: none of Parley's settings."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'dev.sqlite3'}",
    }


def test_a_teammate_is_added_with_make_user_and_gets_a_token_with_make_token(tmp_path):
    env = fresh_environment(tmp_path)
    terminal = pexpect.spawn(
        "make", ["-s", "user", "NAME=bob"], cwd=ROOT, env=env, encoding="utf-8", timeout=120
    )
    terminal.expect("Password: ")
    terminal.sendline("a long enough passphrase")
    terminal.expect(r"Password \(again\): ")
    terminal.sendline("a long enough passphrase")
    terminal.expect(r"Added bob\. They sign in at http://127\.0\.0\.1:8000/login/")
    terminal.expect(pexpect.EOF)
    terminal.close()
    assert terminal.exitstatus == 0

    with sqlite3.connect(tmp_path / "dev.sqlite3") as database:
        [(is_staff,)] = database.execute("SELECT is_staff FROM auth_user WHERE username = 'bob'")
    assert not is_staff

    printed = subprocess.run(
        ["make", "-s", "token", "NAME=bob"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    assert re.fullmatch(r"parley_\S{40,}\n", printed.stdout)


def test_make_user_says_what_is_wrong_with_a_password_and_adds_no_one(tmp_path):
    env = fresh_environment(tmp_path)
    terminal = pexpect.spawn(
        "make", ["-s", "user", "NAME=carol"], cwd=ROOT, env=env, encoding="utf-8", timeout=120
    )
    for _ in range(2):
        terminal.expect("Password")
        terminal.sendline("carol")
    terminal.expect("The password is too similar to the username.")
    terminal.expect(pexpect.EOF)
    terminal.close()
    assert terminal.exitstatus != 0
    with sqlite3.connect(tmp_path / "dev.sqlite3") as database:
        assert database.execute(
            "SELECT count(*) FROM auth_user WHERE username = 'carol'"
        ).fetchone() == (0,)


def test_a_missing_production_secret_is_one_line(tmp_path):
    result = run_isolated(["manage.py", "create_api_token", "demo"], tmp_path, DEBUG="false")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "ImproperlyConfigured: Set SECRET_KEY, or DEBUG=true for development (make run, "
        "make token, make user and make chat set it)."
    ]
