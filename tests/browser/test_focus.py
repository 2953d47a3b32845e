"""Where the focus goes: never to the page's <body> after Stop, a version switch, Save and
send, or a question answered in another tab; and on a touch screen (a coarse pointer), Enter
starts a new line, Send sends, and no page opens the keyboard by focusing the composer."""

import re

from playwright.sync_api import expect

from tests.browser.pages import log_in, user_messages


def focused_tag(page) -> str:
    return page.evaluate("document.activeElement ? document.activeElement.tagName : ''")


def test_on_a_touch_screen_enter_starts_a_line_and_send_sends(
    browser, parley_server, person, screenshots
):
    context = browser.new_context(
        base_url=parley_server.url,
        locale="en-US",
        viewport={"width": 390, "height": 800},
        has_touch=True,
        is_mobile=True,
    )
    page = context.new_page()
    log_in(page, *person)
    composer = page.get_by_role("textbox", name="Message")
    # Nothing takes the focus on load: the phone's keyboard stays down.
    expect(composer).not_to_be_focused()
    assert focused_tag(page) == "BODY"
    expect(composer).to_have_accessible_description(
        re.compile(r"Enter starts a new line; the Send button sends\.")
    )
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width in (1280, 390):  # a tablet and a phone
            page.set_viewport_size({"width": width, "height": 800})
            page.screenshot(path=screenshots / f"composer-touch-{scheme}-{width}.png")
    page.set_viewport_size({"width": 390, "height": 800})
    composer.tap()
    composer.fill("one")
    composer.press("Enter")
    composer.press_sequentially("two")
    expect(composer).to_have_value("one\ntwo")
    assert page.url.endswith("/conversations/new/")
    page.get_by_role("button", name="Send").tap()
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(user_messages(page)).to_have_count(1)
    expect(user_messages(page).first).to_contain_text("one")
    # A conversation's page does not focus the composer either.
    page.reload()
    expect(user_messages(page)).to_have_count(1)
    expect(composer).not_to_be_focused()
    context.close()


def test_on_a_desktop_enter_sends_and_the_composer_has_the_focus(page, parley_server, person):
    log_in(page, *person)
    composer = page.get_by_role("textbox", name="Message")
    expect(composer).to_be_focused()
    expect(composer).to_have_accessible_description(
        re.compile(r"Enter sends; Shift\+Enter starts a new line\.")
    )
    composer.fill("one")
    composer.press("Enter")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(user_messages(page)).to_have_count(1)
