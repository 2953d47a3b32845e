"""A streamed reply in real Chromium: while it streams, tabs get only the new text (appended
to the draft); a tab opened mid-stream catches up; every tab ends with the reply once."""

import time

from playwright.sync_api import expect

from tests.browser.pages import (
    log_in,
    new_conversation,
    poll,
    send,
    transcript_items,
    watch_text,
)

WORDS = " ".join(f"w{i}" for i in range(30))
END = "two tools in one turn."  # how the scripted agent's fallback reply ends


def test_a_reply_streams_whole_and_once_into_an_open_tab_and_one_opened_mid_stream(context, page):
    log_in(page)
    new_conversation(page)
    send(page, WORDS)
    reply = page.locator(".message-assistant .block-text").last
    expect(reply).to_contain_text("w0")

    late = context.new_page()
    late.goto(page.url)  # mid-stream: the page has the draft so far, the socket the rest
    seen = watch_text(reply, END)

    assert len(seen) >= 3, seen  # it grew in front of the user
    # Each text shown was the start of the whole (nothing doubled or out of order on the way).
    # The draft streams as plain text ("*time*") and may already be rendered ("time") by the
    # time the end shows: compare without the markdown's asterisks.
    whole = seen[-1].replace("*", "")
    for text in seen[:-1]:
        assert whole.startswith(text.replace("*", "")), (text, seen[-1])
    assert seen[-1].count("w29") == 1
    for tab in (page, late):
        shown = tab.locator(".message-assistant").last
        # Rendered as markdown once complete (the fallback reply's *time* is emphasised).
        expect(shown.locator("em")).to_have_text("time")
        assert shown.inner_text().count("w29") == 1
        assert shown.inner_text().count(END) == 1
        expect(transcript_items(tab)).to_have_count(2)


def test_a_streaming_reply_shows_as_markdown_as_it_grows_never_its_raw_markers(page):
    log_in(page)
    new_conversation(page)
    send(page, WORDS)
    reply = page.locator(".message-assistant").last
    expect(reply).to_contain_text("w0")
    seen = watch_text(reply, END)
    assert len(seen) >= 3, seen
    # "*time*" is emphasised from its first asterisk on, also while it streams.
    assert [text for text in seen if "*" in text] == []
    expect(reply.locator("em")).to_have_text("time")


def test_chromium_streams_over_permessage_deflate(context, page):
    """Chromium offers permessage-deflate and config.serve accepts it with its small client
    window: the handshake as the browser saw it (DevTools protocol), and a reply streamed
    through the compressed socket."""
    devtools = context.new_cdp_session(page)
    devtools.send("Network.enable")
    offers, answers = [], []

    def extensions(headers: dict) -> str:
        return next((v for k, v in headers.items() if k.lower() == "sec-websocket-extensions"), "")

    devtools.on(
        "Network.webSocketWillSendHandshakeRequest",
        lambda event: offers.append(extensions(event["request"]["headers"])),
    )
    devtools.on(
        "Network.webSocketHandshakeResponseReceived",
        lambda event: answers.append(extensions(event["response"]["headers"])),
    )
    log_in(page)
    new_conversation(page)
    send(page, WORDS)
    shown = page.locator(".message-assistant").last
    expect(shown.locator("em")).to_have_text("time")
    assert shown.inner_text().count("w29") == 1
    assert offers and offers[-1].startswith("permessage-deflate"), offers
    assert answers[-1] == (
        "permessage-deflate; client_no_context_takeover; client_max_window_bits=9"
    ), answers


# The page's distance from its end, in pixels (0: the end is in view).
FROM_END = (
    "() => { const d = document.scrollingElement; "
    "return d.scrollHeight - d.scrollTop - d.clientHeight; }"
)


def test_the_page_follows_a_streaming_reply_unless_the_reader_scrolled_up(page):
    """At the end of the page, the reader sees each new word of a reply; scrolled up to read
    something earlier, they stay where they are while the reply goes on (parley.js learns it
    from their scrolling, not by measuring the page before every streamed append)."""
    page.set_viewport_size({"width": 800, "height": 360})
    log_in(page)
    new_conversation(page)
    long_message = " ".join(f"line{i:03d}" for i in range(300))  # taller than the window
    reply = page.locator(".message-assistant .block-text").last

    send(page, long_message)
    expect(reply).to_contain_text("You said")
    distances = []  # sampled while the reply grows
    deadline = time.monotonic() + 20
    while END not in reply.inner_text() and time.monotonic() < deadline:
        distances.append(page.evaluate(FROM_END))
    expect(page.locator(".is-draft")).to_have_count(0)
    assert page.evaluate("document.scrollingElement.scrollTop") > 0
    assert len(distances) >= 3 and max(distances) <= 2, distances  # at the end all along
    assert page.evaluate(FROM_END) <= 2

    send(page, long_message)
    expect(page.locator(".message-assistant")).to_have_count(2)
    expect(reply).to_contain_text("You said")
    page.mouse.move(400, 150)
    page.mouse.wheel(0, -1500)  # the reader scrolls up, as with a mouse wheel
    poll(page, FROM_END, lambda distance: distance > 1000, timeout=10)  # the wheel's scroll
    held = page.evaluate("document.scrollingElement.scrollTop")
    watch_text(reply, END)
    expect(page.locator(".is-draft")).to_have_count(0)
    assert abs(page.evaluate("document.scrollingElement.scrollTop") - held) <= 2
    assert page.evaluate(FROM_END) > 1000
