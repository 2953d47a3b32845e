"""Sub-agents as a person sees them: two children streaming at once into the parent's
transcript, each a collapsible section with its status; Stop ends them all."""

import time

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send

CLOCK_DONE = "read from the clock tool just now."
# The scripted agent's pause between words when the test stops it mid-reply.
WORD_SECONDS = 0.3
ARITHMETIC_DONE = "worked out with the calculator tool."


def section(page, number: int):
    return page.locator("details.block-subagent").filter(
        has=page.get_by_role("list", name=f"Sub-agent {number}'s transcript")
    )


def test_two_subagents_stream_into_the_parents_transcript(open_page, start_server):
    server = start_server(SCRIPTED_AGENT_DELAY="0.1")
    page = open_page(server, locale="en-US")
    log_in(page)
    new_conversation(page)
    send(page, "Please research this")

    clock, arithmetic = section(page, 1), section(page, 2)
    expect(clock).to_contain_text("Sub-agent 1: Clock", timeout=20_000)
    expect(arithmetic).to_contain_text("Sub-agent 2: Arithmetic")
    seen: dict[int, list[str]] = {1: [], 2: []}
    both_working = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        texts = {1: clock.inner_text(), 2: arithmetic.inner_text()}
        for number, text in texts.items():
            if not seen[number] or seen[number][-1] != text:
                seen[number].append(text)
        both_working |= all("Working…" in text for text in texts.values())
        if CLOCK_DONE in texts[1] and ARITHMETIC_DONE in texts[2]:
            break
        time.sleep(0.02)
    else:
        raise AssertionError(f"the sub-agents did not finish: {seen[1][-1:]} {seen[2][-1:]}")
    # Streamed: each section grew word by word, and the two worked at the same time.
    assert len(seen[1]) >= 5 and len(seen[2]) >= 5, (len(seen[1]), len(seen[2]))
    assert both_working
    expect(clock.locator(".subagent-status")).to_have_text("Done")
    expect(arithmetic.locator(".subagent-status")).to_have_text("Done")
    expect(page.locator(".message-assistant").last).to_contain_text(
        "Both sub-agents reported back.", timeout=20_000
    )
    expect(page.locator(".message-assistant").last).to_contain_text("Six times seven is 42")
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)

    # Collapsible: a section folds away and stays folded.
    clock.locator("> summary").click()
    expect(clock.get_by_role("list")).to_be_hidden()

    # A reload shows the same transcript, children included.
    page.reload()
    expect(section(page, 1).locator(".subagent-status")).to_have_text("Done")
    expect(section(page, 2)).to_contain_text(ARITHMETIC_DONE)


def test_stop_on_the_parent_stops_its_subagents(open_page, start_server):
    server = start_server(SCRIPTED_AGENT_DELAY=str(WORD_SECONDS))
    page = open_page(server, locale="en-US")
    log_in(page)
    new_conversation(page)
    send(page, "delegate")
    clock, arithmetic = section(page, 1), section(page, 2)
    expect(clock).to_contain_text("I am the clock sub-agent.", timeout=20_000)
    expect(arithmetic).to_contain_text("I am the arithmetic sub-agent.", timeout=20_000)
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    for child in (clock, arithmetic):
        expect(child.locator(".subagent-status")).to_have_text("Stopped")
        expect(child).to_contain_text("Stopped together with the agent that started it.")
    kept = clock.inner_text()
    # Nothing more streams in after Stop. A child is a turn of its own, which no later event
    # of the parent's comes after: a child still running writes a word every WORD_SECONDS,
    # and three of them pass without one.
    time.sleep(3 * WORD_SECONDS)
    assert clock.inner_text() == kept
    assert CLOCK_DONE not in kept
