"""Answering from anywhere, in a real browser against the real server: a question mailed by
Django's file backend, its option link opened with no session and confirmed; the e-mail's
HTML part and the confirm page as pictures (docs/screenshots); and Settings' "Notify this
browser" switch."""

import email
import email.policy
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, log_in, new_conversation, send
from tests.live_server import LiveServer

WIDTHS = {"": 1280, "-phone": 390}


@pytest.fixture
def mail_server(tmp_path):
    """A server of this test's own that writes each mail to a file (EMAIL_FILE_PATH), with
    PUBLIC_URL its own address, and demo's "Email me questions" on."""
    mailbox = tmp_path / "mail"
    server = LiveServer(
        tmp_path / "server",
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(mailbox),
        DEFAULT_FROM_EMAIL="Parley <parley@example.org>",
    )
    server.env["PUBLIC_URL"] = server.url
    server.log_path.parent.mkdir()
    server.set_up_database()
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; from accounts.models import Preferences; "
        "u = User.objects.get(username='demo'); u.email = 'demo@example.org'; u.save(); "
        "Preferences.objects.update_or_create(user=u, defaults={'email_questions': True})",
    )
    server.start()
    server.mailbox = mailbox
    yield server
    server.stop()


def read_mail(mailbox: Path, timeout: float = 20.0) -> email.message.EmailMessage:
    """The one message the file backend wrote (each file holds a session's messages)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = sorted(mailbox.glob("*.log")) if mailbox.exists() else []
        if files and files[0].stat().st_size:
            raw = files[0].read_bytes().split(b"\n" + b"-" * 79 + b"\n")[0]
            return email.message_from_bytes(raw, policy=email.policy.default)
        time.sleep(0.1)
    raise AssertionError("no mail was written")


def test_an_emailed_option_is_confirmed_without_logging_in(mail_server, open_page, screenshots):
    page = open_page(mail_server)
    log_in(page)
    new_conversation(page)
    send(page, "Choose a pizza for the team")
    question = page.get_by_role("group", name="Pizza")
    expect(question).to_be_visible()

    message = read_mail(mail_server.mailbox)
    assert message["To"] == "demo@example.org"
    assert message["Subject"] == "Parley asks: Pizza"
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    conversation_url = page.url.split("#")[0]
    for part in (text, html):
        assert "Which pizza should I order for the team?" in part
        assert "Let me ask you something first." in part  # the agent's words before it
        assert f"{conversation_url}#question-" in part
    links = re.findall(re.escape(mail_server.url) + r"/answer/[^/\s\"<>]+/", text)
    assert len(links) == 3
    margherita, pepperoni, _funghi = links
    assert margherita in html and pepperoni in html

    # The HTML part, as a mail client shows it.
    for suffix, width in WIDTHS.items():
        for scheme in ("light", "dark"):
            viewer = open_page(
                mail_server, viewport={"width": width, "height": 900}, color_scheme=scheme
            )
            viewer.set_content(html)
            expect(viewer.get_by_role("link", name=re.compile("^Margherita"))).to_be_visible()
            name = "email-question" + ("-dark" if scheme == "dark" else "") + suffix
            viewer.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)

    # Someone else's browser, signed in as nobody: the link shows, and only shows.
    stranger = open_page(mail_server)
    errors = []  # console errors, CSP violations included
    stranger.on("console", lambda m: m.type == "error" and errors.append(m.text))
    response = stranger.goto(pepperoni)
    assert response.status == 200
    expect(stranger.get_by_role("heading", name="Which pizza should I order for the team?"))
    expect(stranger.get_by_text("Pepperoni", exact=True)).to_be_visible()
    confirm = stranger.get_by_role("button", name="Confirm answer")
    expect(confirm).to_be_visible()
    audited = open_page(mail_server, bypass_csp=True)  # axe is injected for the scan only
    audited.goto(pepperoni)
    assert axe_violations(audited) == []
    for suffix, width in WIDTHS.items():
        for scheme in ("light", "dark"):
            look = open_page(
                mail_server, viewport={"width": width, "height": 800}, color_scheme=scheme
            )
            look.goto(pepperoni)
            expect(look.get_by_role("button", name="Confirm answer")).to_be_visible()
            name = "email-confirm" + ("-dark" if scheme == "dark" else "") + suffix
            look.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
    expect(question.get_by_role("button", name=re.compile("^Margherita"))).to_be_visible()

    confirm.click()
    expect(stranger.get_by_role("status")).to_have_text(
        "Your answer “Pepperoni” was sent. The agent goes on."
    )
    assert errors == []
    # The person's own tab sees it answered, live, and the agent go on with it.
    expect(page.locator(".message-assistant").last).to_contain_text("Great, ordering: Pepperoni")
    assert mail_server.query("SELECT answered_via, answer_text FROM questions_question") == [
        ("email", "Pepperoni")
    ]

    again = open_page(mail_server)
    response = again.goto(pepperoni)
    assert response.status == 410
    expect(again.get_by_role("heading", name="This link has already been used.")).to_be_visible()
    expect(again.get_by_role("button", name="Confirm answer")).to_have_count(0)
    response = again.goto(margherita)
    assert response.status == 410
    expect(again.get_by_role("heading", name="This question was already answered.")).to_be_visible()
    assert mail_server.query(
        "SELECT count(*) FROM questions_question WHERE status = 'answered'"
    ) == [(1,)]


def test_a_user_sets_their_own_address_by_a_link_mailed_to_it(mail_server, open_page):
    page = open_page(mail_server, bypass_csp=True)  # axe is injected for the scan only
    log_in(page)
    page.goto("/settings/")
    section = page.get_by_role("region", name="E-mail address")
    box = section.get_by_role("textbox", name="New e-mail address")
    expect(section).to_contain_text("Now demo@example.org.")

    # A refusal is said by the box, and what was typed stays.
    box.fill("demo at example")
    box.press("Enter")
    alert = page.get_by_role("alert")
    expect(alert).to_have_text("Enter an e-mail address, such as ada@example.org.")
    expect(box).to_have_value("demo at example")
    expect(box).to_have_attribute("aria-invalid", "true")
    assert axe_violations(page) == []

    box.fill("demo2@example.org")
    section.get_by_role("button", name="Send confirmation link").click()
    expect(page.get_by_role("status").first).to_contain_text(
        "We sent a link to demo2@example.org. Open it to make it your e-mail address."
    )
    expect(section).to_contain_text("Now demo@example.org.")  # not before it is confirmed

    message = read_mail(mail_server.mailbox)
    assert message["To"] == "demo2@example.org"
    text = message.get_body(preferencelist=("plain",)).get_content()
    [link] = re.findall(re.escape(mail_server.url) + r"/settings/email/confirm/[^/\s]+/", text)
    page.goto(link)
    expect(page.get_by_role("heading", name="Confirm your e-mail address")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text("demo2@example.org")
    assert axe_violations(page) == []
    page.get_by_role("button", name="Confirm address").click()
    expect(page.get_by_role("status").first).to_contain_text(
        "Your e-mail address is now demo2@example.org."
    )
    expect(page.get_by_role("region", name="E-mail address")).to_contain_text(
        "Now demo2@example.org."
    )
    # The same link again says it was used.
    page.goto(link)
    expect(page.get_by_role("heading", name=re.compile("already been used"))).to_be_visible()
