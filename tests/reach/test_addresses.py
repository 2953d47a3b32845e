"""A user sets their own e-mail address in Settings: a link mailed to the new address, which
only a POST from the same account confirms, once; the address never changes before."""

import re
import smtplib

import pytest
from django.core import mail, signing
from django.test import Client
from django.urls import reverse

from reach import addresses

# Also run on PostgreSQL (make test): the address is set by a conditional update.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SETTINGS = reverse("accounts:preferences")
CHANGE = reverse("reach:change_address")
LINK = re.compile(r"https?://[^/\s\"]+(/settings/email/confirm/[^/\s\"]+/)")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def ask_for(client: Client, address: str):
    return client.post(CHANGE, {"email": address})


def link_in(message) -> str:
    """The confirmation link's path, the same in both parts."""
    [html] = [body for body, kind in message.alternatives if kind == "text/html"]
    paths = set(LINK.findall(message.body)) | set(LINK.findall(html))
    assert len(paths) == 1, paths
    return paths.pop()


def confirm(client: Client, path: str):
    page = client.get(path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    return page, client.post(path, {"csrfmiddlewaretoken": token[1] if token else ""})


def test_a_link_goes_to_the_new_address_and_only_confirming_sets_it(user):
    client = signed_in(user)
    response = ask_for(client, "  ada@example.org ")
    assert response.status_code == 302
    [message] = mail.outbox
    assert message.to == ["ada@example.org"]
    assert message.subject == "Confirm your e-mail address for Parley"
    assert "The link works for 24 hours." in message.body
    page = client.get(SETTINGS).content.decode()
    assert "We sent a link to ada@example.org. Open it to make it your e-mail address." in page
    user.refresh_from_db()
    assert user.email == ""  # nothing changes before the link is confirmed

    path = link_in(message)
    page, confirmed = confirm(client, path)
    assert page.status_code == 200
    assert "ada@example.org" in page.content.decode()
    assert "Confirm address" in page.content.decode()
    assert confirmed.status_code == 302
    user.refresh_from_db()
    assert user.email == "ada@example.org"
    assert "Your e-mail address is now ada@example.org." in client.get(SETTINGS).content.decode()


def test_opening_the_link_changes_nothing(user):
    client = signed_in(user)
    ask_for(client, "ada@example.org")
    client.get(link_in(mail.outbox[0]))
    client.get(link_in(mail.outbox[0]))
    user.refresh_from_db()
    assert user.email == ""


def test_a_link_works_once_and_an_older_one_stops_when_another_is_confirmed(user):
    client = signed_in(user)
    ask_for(client, "first@example.org")
    ask_for(client, "second@example.org")
    first, second = (link_in(m) for m in mail.outbox)
    assert confirm(client, second)[1].status_code == 302
    for path in (second, first):
        page = client.get(path)
        assert page.status_code == 410
        assert "This link has already been used" in page.content.decode()
        assert client.post(path).status_code == 410
    user.refresh_from_db()
    assert user.email == "second@example.org"


def test_another_account_cannot_confirm_it(user, other_user):
    ask_for(signed_in(user), "ada@example.org")
    path = link_in(mail.outbox[0])
    stranger = signed_in(other_user)
    for response in (stranger.get(path), stranger.post(path)):
        assert response.status_code == 400
        assert "This link is for another account" in response.content.decode()
    user.refresh_from_db()
    other_user.refresh_from_db()
    assert (user.email, other_user.email) == ("", "")


def test_without_a_session_the_link_asks_to_log_in_first(user):
    ask_for(signed_in(user), "ada@example.org")
    path = link_in(mail.outbox[0])
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_tampered_or_expired_link_says_so(user, settings):
    client = signed_in(user)
    ask_for(client, "ada@example.org")
    path = link_in(mail.outbox[0])
    tampered = client.get(path[:-3] + "xx/")
    assert tampered.status_code == 400
    assert "This link is not valid" in tampered.content.decode()
    token = path.rstrip("/").rsplit("/", 1)[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(addresses, "EMAIL_CONFIRM_SECONDS", -1)
        expired = client.post(reverse("reach:confirm_address", args=[token]))
    assert expired.status_code == 410
    assert "This link has expired" in expired.content.decode()
    user.refresh_from_db()
    assert user.email == ""
    assert signing.loads(token, salt=addresses.SALT)["address"] == "ada@example.org"


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("", "Enter an e-mail address, such as ada@example.org."),
        ("not an address", "Enter an e-mail address, such as ada@example.org."),
        ("a\x00@example.org", "Enter an e-mail address, such as ada@example.org."),
        ("x" * 250 + "@example.org", "Enter an e-mail address, such as ada@example.org."),
        ("ADA@example.org", "That is your e-mail address already."),
    ],
)
def test_a_refused_address_is_said_by_the_box_and_kept(user, typed, said):
    user.email = "ada@example.org"
    user.save(update_fields=["email"])
    response = ask_for(signed_in(user), typed)
    assert response.status_code == 400
    page = response.content.decode()
    assert f'<p class="form-error" id="email-error" role="alert">{said}</p>' in page
    assert 'aria-invalid="true"' in page
    assert not mail.outbox


def test_a_mail_server_that_refuses_is_said_and_nothing_changes(user, monkeypatch):
    def refuse(*args, **kwargs):
        raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")

    monkeypatch.setattr("django.core.mail.EmailMultiAlternatives.send", refuse)
    response = ask_for(signed_in(user), "ada@example.org")
    assert response.status_code == 400
    assert "The confirmation e-mail could not be sent. Try again later." in (
        response.content.decode()
    )


def test_asking_again_and_again_is_limited(user):
    client = signed_in(user)
    for n in range(addresses.MAILS_PER_HOUR):
        assert ask_for(client, f"ada{n}@example.org").status_code == 302
    refused = ask_for(client, "ada-again@example.org")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "You asked for several confirmation e-mails already" in refused.content.decode()
    assert len(mail.outbox) == addresses.MAILS_PER_HOUR


def test_the_link_is_under_public_url_when_it_is_set(user, settings):
    settings.PUBLIC_URL = "https://parley.example.org"
    ask_for(signed_in(user), "ada@example.org")
    assert "https://parley.example.org/settings/email/confirm/" in mail.outbox[0].body


def test_settings_offer_adding_an_address_when_there_is_none(user):
    page = signed_in(user).get(SETTINGS).content.decode()
    assert "Your account has no e-mail address yet: add one." in page
    assert '<label for="email-address">Your e-mail address</label>' in page


# Invisible and line-breaking characters: the typed address is refused as any other bad one,
# wherever the character is, and asks for no mail (so uses none of the hour's).
HIDDEN = {
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
    "next line": "\x85",
    "NUL": "\x00",
    "CR": "\r",
    "LF": "\n",
    "CRLF": "\r\n",
    "zero-width space": "\u200b",
    "bidi override": "\u202e",
    "byte order mark": "\ufeff",
}


@pytest.mark.parametrize("where", ["ada{}@example.org", "ada@exa{}mple.org", "ada@example.org{}"])
@pytest.mark.parametrize("hidden", HIDDEN.values(), ids=HIDDEN.keys())
def test_an_address_with_an_invisible_or_line_break_character_is_refused(user, hidden, where):
    client = signed_in(user)
    response = ask_for(client, where.format(hidden))
    assert response.status_code == 400
    said = "Enter an e-mail address, such as ada@example.org."
    assert f'<p class="form-error" id="email-error" role="alert">{said}</p>' in (
        response.content.decode()
    )
    assert not mail.outbox
    user.refresh_from_db()
    assert user.email == ""
    # None of the hour's confirmation mails was used.
    for n in range(addresses.MAILS_PER_HOUR):
        assert ask_for(client, f"ada{n}@example.org").status_code == 302


def test_an_address_whose_domain_cannot_be_mailed_is_refused(user):
    # Accepted by Django's validator, refused by the IDNA encoding that mail needs.
    response = ask_for(signed_in(user), "ada@exa\u2ff0mple.org")
    assert response.status_code == 400
    assert "Enter an e-mail address, such as ada@example.org." in response.content.decode()
    assert not mail.outbox
