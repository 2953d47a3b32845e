"""The admin's login (/admin/login/) is throttled as /login/ is (config.auth, core.limits):
per account and per client address, the failures on either form counting on both."""

import re

import pytest
from django.test import Client

# Also run on PostgreSQL (make test), as the login form's own throttle is.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ADMIN_LOGIN = "/admin/login/?next=/admin/"
LOCKED = re.compile(r"Too many failed logins\. Try again in (\d+) minutes\.")


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")


def admin_log_in(client: Client, username: str, password: str):
    return client.post(ADMIN_LOGIN, {"username": username, "password": password})


def log_in(client: Client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


def signed_in_to_the_admin(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_the_admin_login_locks_out_after_as_many_failures_as_the_login_form(superuser, settings):
    # The defaults: 10 failures per account, a lockout of 15 minutes.
    assert settings.PARLEY_LOGIN_FAILURES_PER_ACCOUNT == 10
    assert settings.PARLEY_LOGIN_LOCKOUT_SECONDS == 900
    guesser = Client(REMOTE_ADDR="10.0.0.9")
    for _ in range(10):
        assert admin_log_in(guesser, "root", "wrong").status_code == 200
    refused = admin_log_in(guesser, "root", "pw-root-123")  # the right password, while locked
    assert refused.status_code == 429
    assert 890 <= int(refused["Retry-After"]) <= 900
    [minutes] = LOCKED.findall(refused.content.decode())
    assert minutes == "15"
    assert not signed_in_to_the_admin(guesser)
    # Thirty more guesses change nothing: the right password is still refused.
    for _ in range(30):
        assert admin_log_in(guesser, "root", "wrong").status_code == 429
    assert admin_log_in(guesser, "root", "pw-root-123").status_code == 429
    assert not signed_in_to_the_admin(guesser)


@pytest.mark.parametrize("first", [admin_log_in, log_in], ids=["admin-first", "login-first"])
def test_failures_on_either_login_form_count_on_the_other(superuser, settings, first):
    settings.PARLEY_LOGIN_FAILURES_PER_ACCOUNT = 4
    then = log_in if first is admin_log_in else admin_log_in
    guesser = Client(REMOTE_ADDR="10.0.0.9")
    for _ in range(2):
        first(guesser, "root", "wrong")
    for _ in range(2):
        then(guesser, "root", "wrong")
    # Four failures, two on each form: both refuse the right password, from anywhere.
    for form in (admin_log_in, log_in):
        refused = form(Client(REMOTE_ADDR="10.0.0.10"), "root", "pw-root-123")
        assert refused.status_code == 429
        assert LOCKED.search(refused.content.decode())


def test_the_admin_login_is_locked_per_address_across_accounts(
    superuser, django_user_model, settings
):
    settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS = 4
    django_user_model.objects.create_superuser(username="grace", password="pw-grace-123")
    guesser = Client(REMOTE_ADDR="10.0.0.7")
    for name in ["root", "grace", "root", "grace"]:
        assert admin_log_in(guesser, name, "wrong").status_code == 200
    assert admin_log_in(guesser, "grace", "pw-grace-123").status_code == 429
    elsewhere = Client(REMOTE_ADDR="10.0.0.8")
    assert admin_log_in(elsewhere, "grace", "pw-grace-123").status_code == 302
    assert signed_in_to_the_admin(elsewhere)


def test_a_browser_that_signed_in_before_is_not_locked_out_of_the_admin(superuser, settings):
    settings.PARLEY_LOGIN_FAILURES_PER_ACCOUNT = 3
    owner = Client(REMOTE_ADDR="10.0.0.1")
    assert admin_log_in(owner, "root", "pw-root-123").status_code == 302
    device = owner.cookies["parley_device"].value
    owner.logout()  # the test client forgets every cookie here; a browser keeps this one
    owner.cookies["parley_device"] = device
    attacker = Client(REMOTE_ADDR="10.0.0.9")
    for _ in range(3):
        admin_log_in(attacker, "root", "wrong")
    assert admin_log_in(attacker, "root", "pw-root-123").status_code == 429
    assert admin_log_in(owner, "root", "pw-root-123").status_code == 302
    assert signed_in_to_the_admin(owner)
