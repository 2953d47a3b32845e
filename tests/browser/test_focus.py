"""Where the focus goes: never to the page's <body> after Stop, a version switch, Save and
send, or a question answered in another tab; and on a touch screen (a coarse pointer), Enter
starts a new line, Send sends, and no page opens the keyboard by focusing the composer."""

import re

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send, user_messages


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


def photograph(page, screenshots, name: str) -> None:
    """The page as it is, light and dark, at a desktop's and a phone's width (the focus kept)."""
    size = page.viewport_size
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 800})
            page.screenshot(path=screenshots / f"{name}-{scheme}-{width}.png")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(size)


def last_reply(page):
    return page.locator(".message-assistant").last


def wait_until_idle(page):
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_after_stop_the_composer_has_the_focus(start_server, open_page, screenshots):
    server = start_server(SCRIPTED_AGENT_DELAY="0.25")
    page = open_page(server)
    log_in(page)
    new_conversation(page)
    send(page, "Tell me everything")
    expect(last_reply(page)).to_contain_text("You said:")
    stop = page.get_by_role("button", name="Stop")
    stop.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("list", name="Transcript").get_by_text("Stopped")).to_be_visible()
    expect(stop).to_have_count(0)
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    photograph(page, screenshots, "focus-after-stop")


def test_switching_versions_keeps_the_focus_on_the_switch(page, parley_server, screenshots):
    log_in(page)
    new_conversation(page)
    page.get_by_role("button", name="Hello!", exact=True).click()
    expect(last_reply(page)).to_contain_text("scripted")
    wait_until_idle(page)
    page.get_by_role("button", name="Regenerate reply").click()
    expect(page.get_by_role("group", name="Versions of message 2")).to_be_visible()
    wait_until_idle(page)
    previous = page.get_by_role("button", name="Previous version of message 2")
    following = page.get_by_role("button", name="Next version of message 2")
    previous.focus()
    page.keyboard.press("Enter")  # to the first version: Previous is disabled now
    expect(previous).to_be_disabled()
    expect(following).to_be_focused()
    photograph(page, screenshots, "focus-first-version")
    expect(following).to_be_focused()
    page.keyboard.press("Enter")  # back to the newest: Next is disabled now
    expect(following).to_be_disabled()
    expect(previous).to_be_focused()


def test_after_save_and_send_the_composer_has_the_focus(page, parley_server):
    log_in(page)
    new_conversation(page)
    send(page, "first words")
    expect(last_reply(page)).to_contain_text("first words")
    wait_until_idle(page)
    page.get_by_role("button", name="Edit message 1").click()
    box = page.get_by_role("textbox", name="Your message")
    box.fill("second words")
    page.get_by_role("button", name="Save and send").click()
    expect(last_reply(page)).to_contain_text("second words")
    wait_until_idle(page)
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


def test_a_question_answered_in_another_tab_gives_the_focus_to_the_composer(context, parley_server):
    page = context.new_page()
    log_in(page)
    new_conversation(page)
    send(page, "Let's try pizza")
    group = page.get_by_role("group", name="Pizza", exact=True)
    expect(group.get_by_role("button", name="Margherita")).to_be_focused()
    other = context.new_page()
    other.goto(page.url)
    other.get_by_role("group", name="Pizza", exact=True).get_by_role(
        "button", name="Margherita"
    ).click()
    expect(group.get_by_role("button", name="Margherita")).to_have_count(0)
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
