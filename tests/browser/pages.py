"""What a person does on Parley's pages, shared by the browser tests."""

import re
import time
from pathlib import Path

from playwright.sync_api import expect

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"


def log_in(page, username="demo", password="demo"):
    page.goto("/")
    page.get_by_role("textbox", name="Username").fill(username)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    # Signed in, the person lands where they can write: their newest conversation (its
    # waiting question takes the focus, if one waits), or a new one.
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()


def new_conversation(page):
    """A blank composer: the conversation is created by its first message (`send`)."""
    link = page.get_by_role("link", name="New conversation")
    if not link.is_visible():  # a phone: the sidebar is folded
        page.get_by_role("button", name="Conversations").click()
    link.click()
    expect(page).to_have_url(re.compile(r"/conversations/new/$"))
    composer = page.get_by_role("textbox", name="Message")
    if touch_screen(page):  # no keyboard opened by a page load
        expect(composer).not_to_be_focused()
    else:
        expect(composer).to_be_focused()


def touch_screen(page) -> bool:
    """Whether the tab's pointer is coarse: a phone's, where Enter in the composer starts a
    line and the Send button sends."""
    return page.evaluate("matchMedia('(pointer: coarse)').matches")


def transcript_items(page):
    return page.get_by_role("list", name="Transcript").get_by_role("listitem")


def user_messages(page):
    """The person's own messages (headed "You"), not the agent's, which may quote them."""
    return transcript_items(page).filter(has=page.get_by_role("heading", name="You", exact=True))


def send(page, text):
    """Send a message; from a blank composer, the page then moves to the new conversation."""
    blank = page.url.endswith("/conversations/new/")
    # As a person does: Send is offered again once the agent's reply has ended.
    expect(page.get_by_role("button", name="Send")).to_be_enabled(timeout=15_000)
    page.get_by_role("textbox", name="Message").fill(text)
    if touch_screen(page):
        page.get_by_role("button", name="Send").click()
    else:
        page.get_by_role("textbox", name="Message").press("Enter")
    if blank:
        expect(page).to_have_url(re.compile(r"/c/\d+/$"))


def user_menu(page, username="demo"):
    """The header's user menu, opened: Settings, the theme switch, Log out."""
    button = page.get_by_role("banner").get_by_role("button", name=username, exact=True)
    if button.get_attribute("aria-expanded") != "true":
        button.click()
    expect(button).to_have_attribute("aria-expanded", "true")
    return page.get_by_role("banner")


def choose_theme(page, name: str, username="demo") -> None:
    """Pick a theme in the user menu; the page follows at once, and the menu closes again."""
    menu = user_menu(page, username)
    menu.get_by_role("group", name="Theme").get_by_role("button", name=name).click()
    expect(page.locator("html")).to_have_attribute("data-theme", name.lower())
    page.keyboard.press("Escape")


def axe_violations(page) -> list[dict]:
    """axe-core's serious and critical findings on the page (its context must bypass the CSP:
    axe is injected for the scan only)."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document)")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["html"][:120] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def poll(page, expression: str, done, timeout: float, interval_ms: int = 20):
    """Evaluate `expression` in the page until done(value) holds or `timeout` seconds pass;
    the last value. Playwright's wait_for_function polls by evaluating a string, which the
    page's strict CSP refuses once the condition is not true at its first check."""
    deadline = time.monotonic() + timeout
    while not done(value := page.evaluate(expression)) and time.monotonic() < deadline:
        page.wait_for_timeout(interval_ms)
    return value


def watch_text(locator, until: str, timeout: float = 20.0) -> list[str]:
    """Every distinct text the locator shows until it contains `until`."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if locator.count():
            text = locator.inner_text()
            if not seen or seen[-1] != text:
                seen.append(text)
            if until in text:
                return seen
        time.sleep(0.01)
    raise AssertionError(f"never saw {until!r}; saw {seen[-3:]}")
