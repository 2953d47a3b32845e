"""Failures are said where the person is looking, in a long conversation scrolled anywhere:
with the server gone, a status beside the composer, the agent's spinner stopped, and a
message that could not be sent kept with the reason; a deleted conversation and a member's
removed access told in view, the transcript greyed or gone."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, log_in, new_conversation, send

LOST = "Connection lost. Reconnecting…"
NOT_SENT = "Not sent: Parley could not be reached. Your message is kept here."
GONE = "This conversation was deleted."
REMOVED = "You no longer have access to this conversation"


def long_conversation(server, owner: str, *, title: str, shared_with: str = "") -> int:
    made = server.manage(
        "shell",
        "-v",
        "0",
        "-c",
        "from tests.factories import long_conversation; "
        f"print(long_conversation({owner!r}, messages=60, title={title!r}, "
        f"shared_with={shared_with!r}))",
    )
    return int(made.split()[-1])


def scroll_to(page, fraction: float) -> None:
    """Scroll the page to `fraction` of the way down (0: its top, 1: its end)."""
    page.evaluate(
        "(f) => { const d = document.scrollingElement;"
        " d.scrollTop = f * (d.scrollHeight - d.clientHeight); }",
        fraction,
    )


def connection_status(page):
    return page.get_by_role("status", name="Connection")


def assert_just_above(page, upper, lower) -> None:
    """`upper` ends right above `lower` on the screen."""
    top, bottom = upper.bounding_box(), lower.bounding_box()
    gap = bottom["y"] - (top["y"] + top["height"])
    assert 0 <= gap < 48, (top, bottom)


@pytest.mark.parametrize("width", [1280, 390])
def test_with_the_server_gone_mid_reply_the_status_shows_beside_the_composer_and_send_says_why(
    start_server, open_page, screenshots, width
):
    server = start_server(SCRIPTED_AGENT_DELAY="0.2")
    conversation = long_conversation(server, "demo", title="A long talk")
    # The context bypasses the CSP for axe, which is injected for its scan only.
    page = open_page(server, viewport={"width": width, "height": 800}, bypass_csp=True)
    log_in(page)
    page.goto(f"/c/{conversation}/")
    send(page, "Tell me everything")
    expect(page.locator(".message-assistant.is-draft")).to_contain_text("You said")
    message = page.get_by_role("textbox", name="Message")
    expect(message).to_be_focused()
    scroll_to(page, 0)  # reading from the start while the agent writes

    server.stop(kill=True)
    status = connection_status(page)
    expect(status).to_have_text(LOST, timeout=2_000)
    for fraction in (0, 0.5, 1):
        scroll_to(page, fraction)
        expect(status).to_be_in_viewport()
        expect(message).to_be_in_viewport()
        assert_just_above(page, status, message)
    expect(message).to_be_focused()  # the status takes nothing from the keyboard
    # What the agent does is not known meanwhile: no spinner turning, no Stop to press.
    expect(page.locator("#agent-status .spinner")).to_be_hidden()
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()

    scroll_to(page, 0.5)
    message.fill("Written while the server is away")
    message.press("Enter")
    not_sent = page.get_by_role("alert").filter(has_text=NOT_SENT)
    expect(not_sent).to_be_in_viewport()
    expect(message).to_have_value("Written while the server is away")
    expect(message).to_be_focused()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(screenshots / f"disconnected-{width}-{scheme}.png"))
        assert axe_violations(page) == [], scheme

    # Send pressed with the mouse: said again, and the keyboard stays in the composer.
    send_button = page.get_by_role("button", name="Send", exact=True)
    send_button.click()
    expect(not_sent).to_be_in_viewport()
    expect(send_button).to_be_focused()
    expect(message).to_have_value("Written while the server is away")


def test_with_the_server_gone_after_a_reply_send_keeps_the_text_and_says_why(
    start_server, open_page
):
    server = start_server()
    page = open_page(server, viewport={"width": 390, "height": 800})
    log_in(page)
    new_conversation(page)
    send(page, "Hello!")
    expect(page.locator(".message-assistant").last).to_contain_text("scripted")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()  # replied

    server.stop(kill=True)
    expect(connection_status(page)).to_have_text(LOST, timeout=2_000)
    message = page.get_by_role("textbox", name="Message")
    message.fill("Are you there?")
    message.press("Enter")
    expect(page.get_by_role("alert").filter(has_text=NOT_SENT)).to_be_in_viewport()
    expect(message).to_have_value("Are you there?")
    expect(message).to_be_focused()


def test_a_deleted_conversation_is_told_in_view_and_its_transcript_greyed(
    open_page, parley_server, screenshots
):
    title = "Soon deleted"
    conversation = long_conversation(parley_server, "demo", title=title)
    page = open_page(parley_server, viewport={"width": 390, "height": 800})
    log_in(page)
    page.goto(f"/c/{conversation}/")
    expect(page.get_by_role("list", name="Transcript")).to_contain_text("Message number 59")
    scroll_to(page, 0.5)

    elsewhere = open_page(parley_server, viewport={"width": 1280, "height": 800})
    log_in(elsewhere)
    sidebar = elsewhere.get_by_role("complementary", name="Your conversations")
    row = sidebar.get_by_role("listitem").filter(has_text=title)
    row.get_by_role("button", name=f"Actions for “{title}”").click()
    row.get_by_role("menuitem", name="Delete").click()

    expect(page.get_by_role("alert").filter(has_text=GONE)).to_be_in_viewport(timeout=2_000)
    expect(page.get_by_role("list", name="Transcript")).to_have_css("opacity", "0.5")
    expect(page.get_by_role("textbox", name="Message")).to_be_hidden()
    page.screenshot(path=str(screenshots / "deleted-390-light.png"))


def test_deleting_the_open_conversation_offers_undo_then_lands_on_a_new_one(
    open_page, parley_server
):
    page = open_page(parley_server)
    page.clock.install()  # the Undo's 10 s, moved on below without waiting
    log_in(page)
    new_conversation(page)
    send(page, "Soon deleted too")
    sidebar = page.get_by_role("complementary", name="Your conversations")

    def delete() -> None:
        row = sidebar.get_by_role("listitem").filter(has_text="Soon deleted too")
        row.get_by_role("button", name="Actions for “Soon deleted too”").click()
        row.get_by_role("menuitem", name="Delete").click()
        expect(page.get_by_role("alert").filter(has_text=GONE)).to_be_in_viewport()
        expect(page.get_by_role("textbox", name="Message")).to_be_hidden()
        expect(sidebar.get_by_role("button", name="Undo")).to_be_focused()

    delete()
    sidebar.get_by_role("button", name="Undo").click()  # the page loads again, live
    expect(page.get_by_role("heading", name="Soon deleted too", level=1)).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()

    delete()
    url = page.url
    page.clock.fast_forward(11_000)  # past the Undo
    expect(page).not_to_have_url(url)
    expect(page).to_have_url(re.compile(r"/conversations/new/$"))
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")


def test_a_removed_member_is_told_in_view_and_no_longer_sees_the_transcript(
    open_page, parley_server, person, screenshots
):
    conversation = long_conversation(
        parley_server, "demo", title="Shared for a while", shared_with=person[0]
    )
    member = open_page(parley_server, viewport={"width": 1280, "height": 800})
    log_in(member, *person)
    member.goto(f"/c/{conversation}/")
    expect(member.get_by_role("list", name="Transcript")).to_contain_text("Message number 59")
    scroll_to(member, 0.5)

    owner = open_page(parley_server, viewport={"width": 1280, "height": 800})
    log_in(owner)
    owner.goto(f"/c/{conversation}/")
    owner.get_by_role("button", name="Share", exact=True).click()
    dialog = owner.get_by_role("dialog", name="Share this conversation")
    dialog.get_by_role("listitem").filter(has_text=person[0]).get_by_role(
        "button", name="Remove"
    ).click()

    removed = member.get_by_role("alert").filter(has_text=REMOVED)
    expect(removed).to_be_in_viewport(timeout=2_000)
    expect(member.get_by_role("list", name="Transcript")).to_be_hidden()
    expect(member.get_by_role("textbox", name="Message")).to_be_hidden()
    expect(member.get_by_text("Shared with you by demo")).to_be_hidden()
    member.screenshot(path=str(screenshots / "removed-1280-light.png"))
