"""A streamed reply in real Chromium: while it streams, tabs get only the new text (appended
to the draft); a tab opened mid-stream catches up; every tab ends with the reply once."""

import time

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send, transcript_items

WORDS = " ".join(f"w{i}" for i in range(30))
END = "two tools in one turn."  # how the scripted agent's fallback reply ends


def texts_until(locator, until: str, timeout: float = 20.0) -> list[str]:
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


def test_a_reply_streams_whole_and_once_into_an_open_tab_and_one_opened_mid_stream(context, page):
    log_in(page)
    new_conversation(page)
    send(page, WORDS)
    reply = page.locator(".message-assistant .block-text").last
    expect(reply).to_contain_text("w0")

    late = context.new_page()
    late.goto(page.url)  # mid-stream: the page has the draft so far, the socket the rest
    seen = texts_until(reply, END)

    assert len(seen) >= 3, seen  # it grew in front of the user
    # Each text shown was the start of the whole (nothing doubled or out of order on the way).
    for text in seen[:-1]:
        assert seen[-1].startswith(text), (text, seen[-1])
    assert seen[-1].count("w29") == 1
    for tab in (page, late):
        shown = tab.locator(".message-assistant").last
        # Rendered as markdown once complete (the fallback reply's *time* is emphasised).
        expect(shown.locator("em")).to_have_text("time")
        assert shown.inner_text().count("w29") == 1
        assert shown.inner_text().count(END) == 1
        expect(transcript_items(tab)).to_have_count(2)
