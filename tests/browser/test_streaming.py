"""A streamed reply in real Chromium: while it streams, tabs get only the new text (appended
to the draft); a tab opened mid-stream catches up; every tab ends with the reply once; the
reader sees it grow, in view, from its first word to its end."""

import itertools
import time

import pytest
from playwright.sync_api import expect

from tests.browser.pages import (
    log_in,
    new_conversation,
    poll,
    send,
    transcript_items,
    watch_text,
)
from tests.live_server import LiveServer

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


# Installed in every document of the tab (before the page's own scripts): from the first
# socket frame that brings a draft text (or a page that arrives with one), it samples that
# message every 50 ms: whether it is shown, how much of it is in view between the sticky
# header and the composer, and the length of its visible text. `reset()` readies it for the
# next reply; `samples()` reads what it saw.
REPLY_RECORDER = """
(() => {
  const TEXT = /(?:beforeend:#|id=")(draft-\\d+)">\\s*[^<\\s]/;
  const state = { id: null, firstText: null, samples: [], timer: null };
  function band() {
    const bar = document.querySelector(".topbar");
    const composer = document.getElementById("composer");
    const sticky = bar && getComputedStyle(bar).position === "sticky";
    const top = sticky ? bar.getBoundingClientRect().bottom : 0;
    const end = composer ? composer.getBoundingClientRect().top : innerHeight;
    return [top, Math.min(innerHeight, end)];
  }
  function sample() {
    const message = document.getElementById("message-" + state.id.slice("draft-".length));
    const now = performance.now() - state.firstText;
    if (!message) { state.samples.push({ t: now, missing: true }); return; }
    const shown = message.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true });
    const rect = message.getBoundingClientRect();
    const [top, bottom] = band();
    state.samples.push({
      t: now,
      shown: shown,
      inView: Math.min(rect.bottom, bottom) - Math.max(rect.top, top),
      length: shown ? message.innerText.trim().length : 0,
      draft: message.classList.contains("is-draft"),
    });
  }
  function start(id) {
    state.id = id;
    state.firstText = performance.now();
    state.timer = setInterval(sample, 50);
    requestAnimationFrame(sample);
  }
  document.addEventListener("htmx:wsBeforeMessage", (event) => {
    const found = event.target.id === "conversation-live" && TEXT.exec(event.detail.message);
    if (found && state.id === null) { start(found[1]); }
  });
  document.addEventListener("DOMContentLoaded", () => {
    const draft = document.querySelector(".is-draft .draft-text[id]");
    if (draft && draft.textContent.trim() && state.id === null) { start(draft.id); }
  });
  window.__reply = {
    reset() {
      clearInterval(state.timer);
      Object.assign(state, { id: null, firstText: null, samples: [], timer: null });
    },
    samples() { return state.samples; },
  };
})();
"""

SAID = "Tell me a story about a lighthouse keeper who collects shells on a windy beach"


def recorded_reply(page) -> list[dict]:
    """What the recorder saw of the reply that streamed last, from its first word to idle
    (the turn over, and the finished message sampled at least once)."""
    assert poll(page, "window.__reply.samples().length", bool, timeout=15), "no word came"
    expect(page.locator(".is-draft")).to_have_count(0, timeout=30_000)
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled(timeout=10_000)
    samples = poll(
        page, "window.__reply.samples()", lambda s: s and not s[-1].get("draft", True), timeout=5
    )
    page.evaluate("window.__reply.reset()")
    return samples


def assert_streamed_in_view(samples: list[dict], what: str) -> None:
    assert len(samples) >= 20, (what, len(samples))  # many steps, not one jump
    missing = [s for s in samples if s.get("missing") or not s["shown"] or s["inView"] < 16]
    assert missing == [], (what, missing[:5], len(missing), len(samples))
    lengths = [s["length"] for s in samples]
    shrunk = [(a, b) for a, b in itertools.pairwise(lengths) if b < a]
    assert shrunk == [], (what, shrunk)
    assert lengths[-1] > lengths[0], (what, lengths)
    first_seen = next(s["t"] for s in samples if s["length"] > 0)
    assert first_seen <= 500, (what, first_seen)


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """A server whose agent writes a word every 0.1 s: a reply takes seconds to stream."""
    server = LiveServer(tmp_path_factory.mktemp("slow"), SCRIPTED_AGENT_DELAY="0.1")
    server.set_up_database()
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reply_a_regenerated_one_and_an_edited_one_stream_in_view_and_only_grow(
    open_page, slow_server, screenshots, width
):
    """Every 50 ms from the first word to the end, the reply being written is shown, in view
    above the composer, and its visible text only grows; the first word shows at once."""
    page = open_page(slow_server, viewport={"width": width, "height": 800})
    page.add_init_script(REPLY_RECORDER)
    log_in(page)
    new_conversation(page)

    send(page, SAID)
    assert_streamed_in_view(recorded_reply(page), "a new conversation's first reply")

    send(page, "And then what happened at the lighthouse when the storm came in?")
    reply = page.locator(".message-assistant.is-draft")
    expect(reply).to_contain_text("(message 2 of this chat)")
    expect(reply).to_be_visible()
    for scheme in ("light", "dark"):  # mid-stream, as the reader sees it
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(screenshots / f"streaming-{width}-{scheme}.png"))
    page.emulate_media(color_scheme="light")
    assert_streamed_in_view(recorded_reply(page), "a reply")

    page.get_by_role("button", name="Regenerate reply").click()
    assert_streamed_in_view(recorded_reply(page), "a regenerated reply")

    page.get_by_role("button", name="Edit message 3").click()
    page.get_by_role("textbox", name="Your message").fill("What did the keeper find?")
    page.get_by_role("button", name="Save and send").click()
    assert_streamed_in_view(recorded_reply(page), "an edited message's reply")
    expect(page.locator(".message-assistant:visible").last).to_contain_text(
        "What did the keeper find?"
    )
