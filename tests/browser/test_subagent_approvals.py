"""A sub-agent's approval in the browser, with the example notes server and the scripted agent:
the writer sub-agent's call waits in the parent conversation, named for the sub-agent, and in
the inbox, while its sibling finishes; Allow resumes the writer at its call, once."""

import re

from playwright.sync_api import expect

from tests.browser.pages import log_in, new_conversation, send
from tests.browser.test_rules import rules_server  # noqa: F401 (a fixture)
from tests.notes_server import writes


def test_a_subagents_approval_waits_in_the_parent_and_allow_resumes_it(
    open_page,
    rules_server,  # noqa: F811
    screenshots,
):
    page = open_page(rules_server)
    log_in(page)
    new_conversation(page)
    send(page, "Delegate the notes")
    card = page.get_by_role("group", name="Write note")
    expect(card).to_contain_text("Asked by sub-agent 1: Writer")
    # The sibling ran on and finished while the writer waits.
    expect(page.get_by_text(re.compile("^Lister says: "))).to_be_visible()
    expect(page.get_by_text("Writer says:")).to_have_count(0)
    assert "write shopping" not in writes(rules_server.notes)
    page.screenshot(path=str(screenshots / "subagent-approval.png"))

    # It waits in the inbox like any other approval.
    inbox = page.context.new_page()
    inbox.goto(rules_server.url + "/questions/")
    expect(inbox.get_by_role("group", name="Write note")).to_be_visible()
    inbox.close()

    card.get_by_role("button", name="Allow", exact=True).click()
    expect(card.get_by_text("Allowed", exact=True)).to_be_visible()
    reply = page.get_by_role("listitem").filter(has_text="Both reported back.")
    expect(reply).to_contain_text("Writer says: Saved shopping")
    expect(reply).to_contain_text("Lister says: ")
    assert [line for line in writes(rules_server.notes) if line.startswith("write")] == [
        "write shopping"
    ]
