"""The everyday chat parts: themes, highlighted code and copy buttons, message
times, regenerate and edit, Send while the agent replies, the tab title, the empty state and
the API tokens page."""

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.pages import (
    axe_violations,
    choose_theme,
    log_in,
    new_conversation,
    send,
    user_menu,
)

CODE_REPLY = "Press Copy code"


def background(page) -> str:
    return page.evaluate("getComputedStyle(document.documentElement).backgroundColor")


def last_reply(page):
    return page.locator(".message-assistant").last


def wait_until_idle(page):
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_themes_switch_persist_and_pass_axe_at_both_widths(open_page, parley_server, screenshots):
    # axe is injected for the scan only: the page's CSP allows no inline script.
    page = open_page(parley_server, bypass_csp=True, viewport={"width": 1280, "height": 900})
    log_in(page)
    new_conversation(page)
    send(page, "Show me some code")
    expect(last_reply(page)).to_contain_text(CODE_REPLY)
    wait_until_idle(page)
    colours = {}
    for theme in ("Light", "Dark"):
        choose_theme(page, theme)
        colours[theme] = background(page)
        assert axe_violations(page) == [], theme
        page.evaluate("window.scrollTo(0, 0)")
        last_reply(page).hover()  # its actions show
        page.screenshot(path=str(screenshots / f"conversation-{theme.lower()}.png"))
    assert colours["Light"] != colours["Dark"]

    # Tool cards (open), the regenerate and edit controls, at a phone's width too.
    send(page, "What time is it? Use your tools.")
    expect(last_reply(page)).to_contain_text("Two tools, one turn.")
    wait_until_idle(page)
    # A regenerated reply: the version switcher.
    page.get_by_role("button", name="Regenerate reply").click()
    expect(page.get_by_role("group", name="Versions of message 4")).to_contain_text("2/2")
    expect(last_reply(page)).to_contain_text("Two tools, one turn.")
    wait_until_idle(page)
    page.locator(".block-tool:visible").first.locator("summary").click()
    # The actions of a message the pointer is on, and one being edited.
    page.get_by_role("button", name="Edit message 3").click()
    page.get_by_role("list", name="Transcript").get_by_role("listitem").nth(1).hover()
    for theme in ("Light", "Dark"):
        choose_theme(page, theme)
        assert axe_violations(page) == [], theme
        page.set_viewport_size({"width": 390, "height": 844})
        assert axe_violations(page) == [], f"{theme} at 390 px"
        # The message being edited, with its actions (the focus is in it).
        page.get_by_role("textbox", name="Your message").focus()
        page.screenshot(path=str(screenshots / f"conversation-{theme.lower()}-phone.png"))
        # The regenerated reply's switcher and actions, at both widths.
        versions = page.get_by_role("group", name="Versions of message 4")
        for width, height, name in ((390, 844, "phone-versions"), (1280, 900, "versions")):
            page.set_viewport_size({"width": width, "height": height})
            versions.scroll_into_view_if_needed()
            versions.hover()
            page.screenshot(path=str(screenshots / f"conversation-{theme.lower()}-{name}.png"))

    # Remembered for the user: a reload (and any other page) keeps the dark theme.
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    dark_switch = (
        user_menu(page).get_by_role("group", name="Theme").get_by_role("button", name="Dark")
    )
    expect(dark_switch).to_have_attribute("aria-pressed", "true")
    page.goto("/settings/")
    expect(page.get_by_role("radio", name="Dark")).to_be_checked()
    assert background(page) == colours["Dark"]
    choose_theme(page, "System")


def test_login_and_error_pages_follow_the_system_scheme(open_page, parley_server):
    colours = {}
    for scheme in ("light", "dark"):
        page = open_page(parley_server, bypass_csp=True, color_scheme=scheme)
        page.goto("/login/")
        colours[scheme] = background(page)
        assert axe_violations(page) == [], scheme
        log_in(page)
        page.goto("/c/999999/")
        expect(page.get_by_role("heading", name="There is nothing here.")).to_be_visible()
        assert background(page) == colours[scheme]
        assert axe_violations(page) == [], f"error page, {scheme}"
    assert colours["light"] != colours["dark"]


def test_code_is_highlighted_and_code_messages_and_tokens_copy(open_page, parley_server):
    page = open_page(parley_server, permissions=["clipboard-read", "clipboard-write"])
    log_in(page)
    new_conversation(page)
    send(page, "Show me some code")
    reply = last_reply(page)
    expect(reply).to_contain_text(CODE_REPLY)
    # Named after its first message, live: the tab title follows without a reload.
    # Questions other tests left waiting for demo may prefix "(N) " (tests/browser/test_live.py).
    expect(page).to_have_title(re.compile(r"^(\(\d+\) )?Show me some code · Parley$"))
    # Highlighted on the server: Pygments' token spans (a keyword, a function name).
    code = reply.locator("pre code.language-python")
    expect(code.locator("span.k").first).to_have_text("def")
    expect(code.locator("span.nf").first).to_have_text("greet")

    reply.get_by_role("button", name="Copy code").click()
    expect(page.get_by_role("status").filter(has_text="Copied")).to_have_count(1)
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("def greet(name: str) -> str:")
    assert 'print(greet("Parley"))' in copied

    # The label says "Copied" for two seconds, then reads as before.
    expect(reply.get_by_role("button", name="Copy code")).to_be_visible(timeout=10_000)
    reply.get_by_role("button", name="Copy message 2").click()
    expect(reply.get_by_role("button", name="Copied")).to_have_count(1)
    expect(reply.get_by_role("button", name="Copy message 2")).to_have_count(0)
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Here is a small Python function:")

    # Every message has its time: exact on hover, relative in the text.
    time = reply.locator("time")
    expect(time).to_have_text("now")
    assert time.get_attribute("datetime")
    assert "20" in time.get_attribute("title")

    page.goto("/settings/tokens/")
    docs = page.get_by_role("link", name="Read the API documentation")
    assert docs.get_attribute("href").endswith("/api/v1/docs")
    page.get_by_role("textbox", name="Token name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_role("textbox", name="New token").input_value()
    page.get_by_role("button", name="Copy token").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == token


def test_regenerate_and_edit_replace_the_last_turn_and_keep_the_old_one(page, parley_server):
    log_in(page)
    new_conversation(page)
    # The empty conversation suggests what the scripted agent answers; one click sends it.
    page.get_by_role("button", name="Hello!").click()
    expect(last_reply(page)).to_contain_text("scripted")
    # The tab is named after the conversation, which is named after its first message.
    expect(page).to_have_title(re.compile(r"^(\(\d+\) )?Hello! · Parley$"))
    wait_until_idle(page)
    first_reply = last_reply(page).get_attribute("id")

    page.get_by_role("button", name="Regenerate reply").click()
    expect(last_reply(page)).not_to_have_id(first_reply)
    expect(last_reply(page)).to_contain_text("scripted")
    expect(page.locator(f"#{first_reply}")).to_be_hidden()
    expect(page.locator(".message-assistant:visible")).to_have_count(1)
    wait_until_idle(page)

    send(page, "first words")
    expect(last_reply(page)).to_contain_text("You said: “first words” (message 2 of this chat)")
    wait_until_idle(page)
    page.get_by_role("button", name="Edit message 3").click()
    box = page.get_by_role("textbox", name="Your message")
    expect(box).to_have_value("first words")
    box.fill("second words")
    page.get_by_role("button", name="Save and send").click()
    # The model saw the new text, and only it: still message 2 of this chat.
    expect(last_reply(page)).to_contain_text("You said: “second words” (message 2 of this chat)")
    transcript = page.get_by_role("list", name="Transcript")
    # Shown no more (kept in the page only as an older version, hidden).
    assert "first words" not in transcript.inner_text()
    expect(page.locator(".message-user:visible")).to_have_count(2)

    # The old branch is kept in the data.
    conversation_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    kept = parley_server.query(
        "SELECT role, blocks FROM chat_message WHERE conversation_id = %s AND superseded "
        'ORDER BY "order"',
        conversation_id,
    )
    assert [role for role, _ in kept] == ["assistant", "user", "assistant"]
    assert "first words" in kept[1][1]

    # After a reload the page shows the new branch only.
    page.reload()
    expect(last_reply(page)).to_contain_text("second words")
    assert "first words" not in page.get_by_role("list", name="Transcript").inner_text()


def opacity(locator) -> str:
    return locator.evaluate("el => getComputedStyle(el.closest('.message-actions')).opacity")


def test_message_actions_show_on_hover_and_focus_and_edit_any_message(page, parley_server):
    log_in(page)
    new_conversation(page)
    send(page, "Show me some code")
    reply = last_reply(page)
    expect(reply).to_contain_text(CODE_REPLY)
    wait_until_idle(page)
    # The code block's header names its language beside its copy button.
    header = reply.locator(".code-head")
    expect(header.get_by_text("python", exact=True)).to_be_visible()
    expect(header.get_by_role("button", name="Copy code")).to_be_visible()

    send(page, "first words")
    expect(last_reply(page)).to_contain_text("first words")
    wait_until_idle(page)
    # Each message's copy button has a name of its own; edit on the person's messages only.
    for number in (1, 2, 3, 4):
        expect(page.get_by_role("button", name=f"Copy message {number}")).to_have_count(1)
    expect(page.get_by_role("button", name=re.compile(r"^Edit message"))).to_have_count(2)
    expect(page.get_by_role("button", name="Regenerate reply")).to_have_count(1)

    # Quiet until the pointer is on the message, or the focus is in it.
    first_copy = page.get_by_role("button", name="Copy message 1")
    page.mouse.move(1, 1)
    assert opacity(first_copy) == "0"
    page.get_by_role("list", name="Transcript").get_by_role("listitem").first.hover()
    assert opacity(first_copy) == "1"
    page.mouse.move(1, 1)
    assert opacity(first_copy) == "0"
    first_copy.focus()
    assert opacity(first_copy) == "1"
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Edit message 1")).to_be_focused()

    # The first message, edited: what followed it is replaced, and the title follows it.
    page.keyboard.press("Enter")
    box = page.get_by_role("textbox", name="Your message")
    expect(box).to_be_focused()
    expect(box).to_have_value("Show me some code")
    box.fill("Hello there")
    page.get_by_role("button", name="Save and send").click()
    expect(last_reply(page)).to_contain_text("I reply the same way every time")
    expect(page.locator(".message-user:visible")).to_have_count(1)
    transcript = page.get_by_role("list", name="Transcript")
    # Shown no more (kept in the page only as an older version, hidden).
    assert "first words" not in transcript.inner_text()
    expect(page.get_by_role("heading", name="Hello there", level=1)).to_be_visible()
    expect(page).to_have_title(re.compile(r"^(\(\d+\) )?Hello there · Parley$"))
    expect(page.get_by_role("button", name=re.compile(r"^Copy message"))).to_have_count(2)

    # The version switcher: the older version is kept, and shown on request.
    versions = page.get_by_role("group", name="Versions of message 1")
    expect(versions).to_contain_text("2/2")
    first = transcript.get_by_role("listitem").filter(has=versions)
    versions.get_by_role("button", name="Previous version of message 1").click()
    expect(versions).to_contain_text("1/2")
    expect(first).to_contain_text("Show me some code")
    assert "Hello there" not in first.inner_text()
    versions.get_by_role("button", name="Next version of message 1").click()
    expect(versions).to_contain_text("2/2")
    expect(first).to_contain_text("Hello there")
    expect(versions.get_by_role("button", name="Next version of message 1")).to_be_disabled()


def test_jump_to_latest_appears_when_text_arrives_while_scrolled_up(start_server, open_page):
    server = start_server(SCRIPTED_AGENT_DELAY="0.1")
    page = open_page(server, viewport={"width": 800, "height": 420})
    log_in(page)
    new_conversation(page)
    send(page, "Show me some code")
    expect(last_reply(page)).to_contain_text(CODE_REPLY)
    wait_until_idle(page)
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_hidden()

    send(page, "What time is it? Use your tools.")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    page.mouse.wheel(0, -5000)
    expect(jump).to_be_visible()
    jump.click()
    expect(jump).to_be_hidden()
    left = page.evaluate(
        "(d => d.scrollHeight - d.scrollTop - d.clientHeight)(document.scrollingElement)"
    )
    assert left < 160
    expect(last_reply(page)).to_contain_text("Two tools, one turn.")


def test_send_is_disabled_while_the_agent_replies_and_stop_marks_the_reply(start_server, open_page):
    server = start_server(SCRIPTED_AGENT_DELAY="0.25")
    page = open_page(server)
    log_in(page)
    new_conversation(page)
    send(page, "Tell me everything")
    expect(last_reply(page)).to_contain_text("You said:")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    # Regenerate and Edit wait for the turn to end.
    expect(page.get_by_role("button", name="Regenerate reply")).to_have_count(0)
    page.get_by_role("button", name="Stop").click()
    expect(last_reply(page)).to_be_visible()
    expect(page.get_by_role("list", name="Transcript").get_by_text("Stopped")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.get_by_role("button", name="Regenerate reply")).to_be_visible()


def test_the_composer_grows_with_its_text_and_says_the_limit_before_sending(page, parley_server):
    log_in(page)
    new_conversation(page)
    composer = page.get_by_role("textbox", name="Message")
    height = composer.bounding_box()["height"]
    composer.fill("A list:\n- one\n- two\n- three\n- four\n- five")
    assert composer.bounding_box()["height"] > height * 1.5  # grown, not scrolled
    # 20,000 characters may be sent: near them it counts down, past them it says by how much.
    composer.fill("x" * 18_500)
    count = page.locator("#composer-count")
    expect(count).to_have_text("1,500 characters left")
    composer.fill("é" * 20_003)  # characters, as the server counts them
    expect(count).to_have_text("3 characters over the limit of 20,000: shorten it to send it.")
    expect(composer).to_have_attribute("aria-invalid", "true")
    composer.fill("short again")
    expect(count).to_have_text("")
    expect(composer).not_to_have_attribute("aria-invalid", "true")


def test_text_typed_while_the_first_message_makes_the_conversation_is_kept(page, parley_server):
    log_in(page)
    new_conversation(page)
    held = []  # the first message's request, held until the person has typed on

    def hold(route, request):
        if request.method == "POST":
            held.append(route)
        else:
            route.continue_()

    page.route("**/conversations/new/", hold)
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("Plan a trip")
    composer.press("Enter")
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(20)  # until the request reaches the route
    page.keyboard.type("1 more thing")
    for _ in range(5):
        page.keyboard.press("ArrowLeft")  # the caret before "thing"
    held[0].continue_()
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))  # the conversation's own page
    composer = page.get_by_role("textbox", name="Message")
    expect(composer).to_have_value("1 more thing")
    expect(composer).to_be_focused()
    assert composer.evaluate("box => [box.selectionStart, box.selectionEnd]") == [7, 7]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_turn_with_several_tools_reads_as_one_reply_and_a_list_as_a_list(
    open_page, parley_server, screenshots, width
):
    """The agent's words after its tool calls join the message before them: one reply, one
    "Parley" head, no gap; several chosen toppings are a list, not one run-on line."""
    page = open_page(parley_server, bypass_csp=True, viewport={"width": width, "height": 900})
    log_in(page)
    new_conversation(page)
    send(page, "What time is it? Use your tools.")
    transcript = page.get_by_role("list", name="Transcript")
    expect(transcript).to_contain_text("Two tools, one turn")
    replies = page.locator("#transcript > .message-assistant")
    expect(replies).to_have_count(2)
    first, second = replies.nth(0).bounding_box(), replies.nth(1).bounding_box()
    assert abs(second["y"] - (first["y"] + first["height"])) <= 1, (first, second)
    expect(replies.nth(0).locator(".message-author")).to_be_visible()
    assert replies.nth(1).locator(".message-author").bounding_box()["width"] <= 1

    send(page, "Pick several toppings")
    for topping in ("Olives", "Onions"):
        page.get_by_role("checkbox", name=topping).check()
    page.get_by_role("button", name="Submit").click()
    said = transcript.locator(".message-assistant").last
    expect(said.get_by_role("listitem")).to_have_text(["Olives", "Onions"])
    wait_until_idle(page)
    for theme in ("Light", "Dark"):
        choose_theme(page, theme)
        assert axe_violations(page) == [], theme
        replies.nth(1).scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / f"one-turn-{width}-{theme.lower()}.png"))
